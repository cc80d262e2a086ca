"""A Temper tool in Python (componentize-py) against wit/tool.wit.

Input {"text": "..."}; output {"words": n, "lines": n}.
Build: componentize-py -d ../../wit -w tool componentize app -o python_word_count.wasm
"""
import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports.types import ToolError_BadInput


class Run(exports.Run):
    def call(self, input: str) -> str:
        try:
            value = json.loads(input)
            text = value["text"]
        except (ValueError, KeyError, TypeError) as e:
            raise Err(ToolError_BadInput(f"input.text must be a string: {e}"))
        if not isinstance(text, str):
            raise Err(ToolError_BadInput("input.text must be a string"))
        return json.dumps({"words": len(text.split()), "lines": len(text.splitlines())})

"""Agent runs with the real frameworks and scripted models (no network, no
LLM): a tool forged in step 1 is called in step 2 of the same run."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from conftest import seed

from temper_forge import AsyncForge, Forge


def test_pydantic_ai_forges_in_step_1_and_calls_in_step_2(store: str) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from temper_forge.pydantic_ai import TemperToolset

    offered: list[list[str]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        names = sorted(t.name for t in info.function_tools)
        offered.append(names)
        step = len(offered)
        if step == 1:
            return ModelResponse(parts=[ToolCallPart("forge_tool", seed("slugify"))])
        if step == 2:
            return ModelResponse(parts=[ToolCallPart("slugify", {"text": "Hello World"})])
        returned = [
            p.content for m in messages for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)
        ]
        return ModelResponse(parts=[TextPart(json.dumps(returned[-1]))])

    forge = AsyncForge(store=store, judge="rules", agent="agent-1", session="s1")
    agent = Agent(FunctionModel(model), toolsets=[TemperToolset(forge)])
    result = asyncio.run(agent.run("make a slug of Hello World"))
    assert json.loads(result.output) == {"slug": "hello-world"}
    assert "slugify" not in offered[0] and {"forge_tool", "run_code"} <= set(offered[0])
    assert "slugify" in offered[1], offered
    sync = forge.sync()
    sync.flush()
    assert Forge(store=store, agent="agent-1", session="s1").stats("slugify")["totalCalls"] == 1


def test_openai_agents_runner_forges_in_step_1_and_calls_in_step_2(store: str) -> None:
    from agents import Agent, ModelResponse, RunConfig, Runner, Usage
    from agents.models.interface import Model
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    from temper_forge.openai_agents import function_tools

    offered: list[list[str]] = []
    seen_outputs: list[Any] = []

    class Scripted(Model):
        async def get_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs, tracing, **kw):  # type: ignore[no-untyped-def,override]
            offered.append(sorted(t.name for t in tools))
            step = len(offered)
            if isinstance(input, list):
                seen_outputs.extend(i["output"] for i in input if isinstance(i, dict) and i.get("type") == "function_call_output")
            if step == 1:
                call = ResponseFunctionToolCall(
                    id="fc1", call_id="c1", type="function_call", name="forge_tool", arguments=json.dumps(seed("slugify"))
                )
                return ModelResponse(output=[call], usage=Usage(), response_id=None)
            if step == 2:
                call = ResponseFunctionToolCall(
                    id="fc2", call_id="c2", type="function_call", name="slugify", arguments=json.dumps({"text": "Hello World"})
                )
                return ModelResponse(output=[call], usage=Usage(), response_id=None)
            text = ResponseOutputText(text=str(seen_outputs[-1]), type="output_text", annotations=[])
            msg = ResponseOutputMessage(id="m1", type="message", role="assistant", status="completed", content=[text])
            return ModelResponse(output=[msg], usage=Usage(), response_id=None)

        def stream_response(self, *args, **kwargs):  # type: ignore[no-untyped-def,override]
            raise NotImplementedError

    forge = Forge(store=store, judge="rules", agent="agent-1", session="s1")
    tools = function_tools(forge)
    assert [t.name for t in tools] == ["forge_tool", "run_code", "search_tools"]
    agent = Agent(name="slugger", model=Scripted(), tools=tools)
    result = asyncio.run(Runner.run(agent, "slug Hello World", run_config=RunConfig(tracing_disabled=True)))
    assert "slugify" not in offered[0] and "forge_tool" in offered[0]
    assert "slugify" in offered[1], offered
    assert "hello-world" in str(seen_outputs[-1])
    assert "hello-world" in result.final_output
    slug_tool = next(t for t in tools if t.name == "slugify")
    # slugify's schema has an optional-free object: strict keeps its meaning.
    assert slug_tool.strict_json_schema is True
    forge_tool = tools[0]
    assert forge_tool.strict_json_schema is False  # optional fields: not strict


def test_langchain_structured_tools(store: str) -> None:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    from temper_forge.langchain import structured_tools

    forge = Forge(store=store, judge="rules", agent="agent-1", session="s1")
    tools = structured_tools(forge)
    by_name = {t.name: t for t in tools}
    assert set(by_name) == {"forge_tool", "run_code", "search_tools"}
    model = GenericFakeChatModel(
        messages=iter(
            [
                AIMessage(content="", tool_calls=[{"name": "forge_tool", "args": seed("slugify"), "id": "1"}]),
                AIMessage(content="", tool_calls=[{"name": "slugify", "args": {"text": "Hello World"}, "id": "2"}]),
            ]
        )
    )

    async def main() -> Any:
        outs = []
        for _ in range(2):
            msg = await model.ainvoke("go")
            for call in msg.tool_calls:
                tool = {t.name: t for t in tools}[call["name"]]
                outs.append(await tool.ainvoke(call["args"]))
        return outs

    forged, slug = asyncio.run(main())
    assert forged["success"] is True
    assert slug == {"slug": "hello-world"}
    assert by_name["forge_tool"].args_schema["required"]  # the forge request's schema, passed through

#!/usr/bin/env python3
"""Checks the links of the built book and of the README, offline.

    linkcheck.py BOOK_DIR SRC_DIR [README.md ...]

BOOK_DIR is mdbook's HTML output (target/book), SRC_DIR the book's Markdown
sources (docs/src). Fails (exit 1), listing every problem, when:

- a page of the built book links (a, link, img, script, iframe) to a file
  that is not in the book, or to `#anchor` that the target page has no
  element with that id for (headings get their ids from mdbook);
- a page still holds an `{{#include ...}}` or `{{#rustdoc_include ...}}`
  directive: mdbook leaves the directive's text in place, and only logs an
  error, when the included file is missing;
- a README links to a file that does not exist in the repository, to a
  chapter that is not in the book (`docs/src/NAME.md` is checked as the
  built `NAME.html`, anchors included), or to a heading of a Markdown file
  that it does not have.

External links (any `scheme:` such as http, https, mailto, or `//host`)
are never fetched: there is no network here, and their availability is not
this project's to test. Python 3 standard library only.
"""

from __future__ import annotations

import html.parser
import os
import re
import sys
import urllib.parse

SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
LINK_ATTRS = {"a": "href", "link": "href", "img": "src", "script": "src", "iframe": "src"}
LEFTOVER = re.compile(r"\{\{#(?:include|rustdoc_include|playground)\b[^}]*\}\}")


class Page(html.parser.HTMLParser):
    """The ids a page defines and the links it makes."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[tuple[int, str]] = []
        self.base: str | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("id",):
            if attrs.get(key):
                self.ids.add(attrs[key])
        if tag == "a" and attrs.get("name"):
            self.ids.add(attrs["name"])
        if tag == "base" and attrs.get("href") is not None:
            self.base = attrs["href"]
        attr = LINK_ATTRS.get(tag)
        if attr and attrs.get(attr) is not None:
            self.links.append((self.getpos()[0], attrs[attr]))

    handle_startendtag = handle_starttag


def parse_page(path: str) -> tuple[Page, str]:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    page = Page()
    page.feed(text)
    page.close()
    return page, text


def is_external(target: str) -> bool:
    return bool(SCHEME.match(target)) or target.startswith("//")


class Book:
    def __init__(self, root: str) -> None:
        self.root = os.path.realpath(root)
        self.pages: dict[str, Page] = {}

    def page(self, path: str) -> Page | None:
        path = os.path.realpath(path)
        if path not in self.pages:
            if not os.path.isfile(path):
                return None
            self.pages[path] = parse_page(path)[0]
        return self.pages[path]

    def check_target(self, path: str, fragment: str) -> str | None:
        """None when `path#fragment` exists in the book, else why not."""
        path = os.path.realpath(path)
        if os.path.isdir(path):
            path = os.path.join(path, "index.html")
        if not (path == self.root or path.startswith(self.root + os.sep)):
            return "points outside the book"
        if not os.path.isfile(path):
            return "no such file in the book"
        if fragment and path.endswith(".html"):
            page = self.page(path)
            if page is not None and fragment not in page.ids:
                return f"{os.path.relpath(path, self.root)} has no id {fragment!r}"
        return None


def check_book(book: Book) -> list[str]:
    problems = []
    for dirpath, _dirs, files in os.walk(book.root):
        for name in sorted(files):
            if not name.endswith(".html"):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, book.root)
            page, text = parse_page(path)
            book.pages[os.path.realpath(path)] = page
            for m in LEFTOVER.finditer(text):
                line = text.count("\n", 0, m.start()) + 1
                problems.append(f"{rel}:{line}: unexpanded {m.group(0)} (a missing file?)")
            # A `<base href="/">` (mdbook's 404 page) makes links root-relative.
            base_dir = book.root if page.base == "/" else dirpath
            for line, target in page.links:
                if not target or is_external(target):
                    continue
                parts = urllib.parse.urlsplit(target)
                fragment = urllib.parse.unquote(parts.fragment)
                if not parts.path:
                    # Same page; `#` alone is the top.
                    if fragment and fragment not in page.ids:
                        problems.append(f"{rel}:{line}: {target}: this page has no id {fragment!r}")
                    continue
                target_path = os.path.join(base_dir, urllib.parse.unquote(parts.path))
                why = book.check_target(target_path, fragment)
                if why:
                    problems.append(f"{rel}:{line}: {target}: {why}")
    return problems


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading (duplicates aside)."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def markdown_anchors(path: str) -> set[str]:
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.lstrip().startswith("```"):
                fenced = not fenced
                continue
            m = None if fenced else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m:
                slug = github_slug(m.group(1))
                n = seen.get(slug, 0)
                seen[slug] = n + 1
                anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


INLINE_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")


def markdown_links(path: str) -> list[tuple[int, str]]:
    links = []
    fenced = False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.lstrip().startswith("```"):
                fenced = not fenced
                continue
            if fenced:
                continue
            plain = re.sub(r"`[^`]*`", "", line)
            for m in INLINE_LINK.finditer(plain):
                links.append((number, m.group(1)))
            m = REF_DEF.match(plain)
            if m:
                links.append((number, m.group(1)))
    return links


def check_readme(readme: str, book: Book, src: str) -> list[str]:
    problems = []
    here = os.path.dirname(os.path.abspath(readme))
    src = os.path.realpath(src)
    rel_readme = os.path.relpath(readme)
    for line, target in markdown_links(readme):
        if is_external(target):
            continue
        parts = urllib.parse.urlsplit(target)
        fragment = urllib.parse.unquote(parts.fragment)
        path = os.path.realpath(os.path.join(here, urllib.parse.unquote(parts.path))) if parts.path else os.path.realpath(readme)
        where = f"{rel_readme}:{line}: {target}"
        # A chapter is checked in the built book (its anchors are mdbook's);
        # SUMMARY.md is the table of contents, not a page of its own.
        if path.startswith(src + os.sep) and path.endswith(".md") and os.path.basename(path) != "SUMMARY.md":
            chapter = os.path.relpath(path, src)[: -len(".md")] + ".html"
            if not os.path.isfile(path):
                problems.append(f"{where}: no such chapter source")
                continue
            why = book.check_target(os.path.join(book.root, chapter), fragment)
            if why:
                problems.append(f"{where}: {why}")
            continue
        if not os.path.exists(path):
            problems.append(f"{where}: no such file")
            continue
        if fragment and path.endswith(".md") and fragment not in markdown_anchors(path):
            problems.append(f"{where}: {os.path.relpath(path)} has no heading for #{fragment}")
    return problems


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    book_dir, src = argv[1], argv[2]
    if not os.path.isfile(os.path.join(book_dir, "index.html")):
        print(f"linkcheck: {book_dir} has no index.html: build the book first", file=sys.stderr)
        return 2
    book = Book(book_dir)
    problems = check_book(book)
    for readme in argv[3:]:
        problems += check_readme(readme, book, src)
    for p in problems:
        print(f"linkcheck: {p}", file=sys.stderr)
    if problems:
        print(f"linkcheck: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    pages = len(book.pages)
    print(f"linkcheck: {pages} pages and {len(argv) - 3} README file(s): no broken internal link")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/env python3
"""Reads every page a test saved and checks it with Python's own HTML parser (html.parser).

Usage: check-pages.py MANIFEST.json
The manifest lists {"file": path, "name": label, "expect": [strings], "fragment": bool}. For each page:
  - elements are balanced: every non-void element that opens is closed, in order (our views close
    everything they open, so a mismatch means markup was cut or leaked);
  - no raw text node holds "<" (text that escaped the escaper) and no decoded text or attribute
    holds "rendered:", "HTML(", a Swift module or type name, or the marker of HTML inside a String;
  - every POST form carries a non-empty _csrf field;
  - nothing is escaped twice (&amp;lt; and friends);
  - each expected string (hostile names, titles…) appears exactly as it was, in decoded text or in
    an attribute value: escaped once, read back whole.
Prints one line per problem and exits 1 when there is any.
"""
import json
import sys
from html.parser import HTMLParser

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
LEAKS = ["rendered:", "HTML(", "[HTML in a String]", "VirtualTourist.", "Swift.", "Optional(", "Array<", "Dictionary<",
         "PinJSON", "AlbumPhoto(", "Substring("]
DOUBLE = ["&amp;lt;", "&amp;gt;", "&amp;amp;", "&amp;quot;", "&amp;#39;"]


class Page(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=False)
        self.stack = []
        self.problems = []
        self.raw_text = []
        self.texts = []
        self.attributes = []
        self.forms = []  # [method, has_csrf]
        self.pending_entity_text = []

    def handle_starttag(self, tag, attrs):
        values = dict(attrs)
        for _, value in attrs:
            if value is not None:
                self.attributes.append(value)
        if tag == "form":
            self.forms.append([(values.get("method") or "get").lower(), False, values.get("action")])
        if tag == "input" and values.get("name") == "_csrf" and self.forms:
            if values.get("type") == "hidden" and values.get("value"):
                self.forms[-1][1] = True
        if tag not in VOID:
            self.stack.append((tag, self.getpos()))

    def handle_startendtag(self, tag, attrs):
        if tag not in VOID:
            self.problems.append(f"self-closing <{tag}/> at {self.getpos()}")
        for _, value in attrs:
            if value is not None:
                self.attributes.append(value)

    def handle_endtag(self, tag):
        if tag in VOID:
            self.problems.append(f"end tag </{tag}> of a void element at {self.getpos()}")
            return
        if not self.stack:
            self.problems.append(f"</{tag}> with nothing open at {self.getpos()}")
            return
        open_tag, where = self.stack.pop()
        if open_tag != tag:
            self.problems.append(f"</{tag}> at {self.getpos()} closes <{open_tag}> opened at {where}")

    def handle_data(self, data):
        self.raw_text.append(data)

    def handle_entityref(self, name):
        self.raw_text.append(f"&{name};")

    def handle_charref(self, name):
        self.raw_text.append(f"&#{name};")


def decoded(parts):
    from html import unescape
    return unescape("".join(parts))


def check(entry):
    with open(entry["file"], encoding="utf-8") as f:
        source = f.read()
    page = Page()
    page.feed(source)
    page.close()
    problems = list(page.problems)
    if page.stack:
        problems.append("left open: " + ", ".join(f"<{t}> at {w}" for t, w in page.stack[-5:]))
    if not entry.get("fragment") and not source.lower().startswith("<!doctype html>"):
        problems.append("does not start with <!doctype html>")
    for data in page.raw_text:
        if "<" in data:
            problems.append(f"raw text holds '<': {data[:80]!r}")
    text = decoded(page.raw_text)
    everything = text + "\n" + "\n".join(page.attributes)
    for leak in LEAKS:
        if leak in everything:
            at = everything.index(leak)
            problems.append(f"leak {leak!r}: …{everything[max(0, at - 40):at + 60]!r}…")
    for method, has_csrf, action in page.forms:
        if method == "post" and not has_csrf:
            problems.append(f"POST form to {action} without a _csrf field")
    for double in DOUBLE:
        if double in source:
            at = source.index(double)
            problems.append(f"escaped twice {double!r}: …{source[max(0, at - 40):at + 40]!r}…")
    for expected in entry.get("expect", []):
        if expected not in everything:
            problems.append(f"expected text missing: {expected[:60]!r} ({len(expected)} characters)")
    if entry.get("forms") is not None and len(page.forms) < entry["forms"]:
        problems.append(f"{len(page.forms)} forms, expected at least {entry['forms']}")
    return problems


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        manifest = json.load(f)
    failed = 0
    for entry in manifest:
        problems = check(entry)
        for problem in problems:
            print(f"{entry['name']}: {problem}")
        failed += bool(problems)
    print(f"checked {len(manifest)} pages, {failed} with problems")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

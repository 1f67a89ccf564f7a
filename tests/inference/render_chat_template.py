#!/usr/bin/env python3
"""The chat-template oracle: renders with Python's jinja2 exactly as transformers'
apply_chat_template does (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
loopcontrols, the {% generation %} tag, tojson with ensure_ascii=False and sort_keys=False,
raise_exception, strftime_now), for the C++ interpreter's tests to compare with.

Usage: render_chat_template.py CASES.json  (prints a JSON list, one result per case)
A case is either
  {"template": "...", "context": {...}}                      a raw template and its variables
or
  {"tokenizer_config": PATH, "messages": [...], "tools": [...] or null,
   "add_generation_prompt": bool, "kwargs": {...}}            transformers' conventions
and its result {"ok": true, "text": "..."} or {"ok": false, "error": "..."}.
"""
import json
import sys
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

SPECIAL_TOKENS = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"]


class GenerationTag(Extension):
    """{% generation %}...{% endgeneration %} renders its body, as transformers' tracker does."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.now().strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def token_text(value):
    """A special token as tokenizer_config.json stores it: a string or an AddedToken object."""
    if isinstance(value, dict):
        return value.get("content")
    return value


def chat_context(case):
    with open(case["tokenizer_config"], encoding="utf-8") as f:
        config = json.load(f)
    template = config["chat_template"]
    tools = case.get("tools")
    if isinstance(template, list):
        named = {t["name"]: t["template"] for t in template}
        template = named["tool_use"] if tools and "tool_use" in named else named["default"]
    context = {}
    for name in SPECIAL_TOKENS:
        text = token_text(config.get(name))
        if text is not None:
            context[name] = text
    extra = [token_text(t) for t in config.get("additional_special_tokens") or []]
    if extra:
        context["additional_special_tokens"] = extra
    context.update(
        messages=case["messages"],
        tools=tools,
        documents=None,
        add_generation_prompt=case.get("add_generation_prompt", True),
    )
    context.update(case.get("kwargs") or {})
    return template, context


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        cases = json.load(f)
    env = make_environment()
    results = []
    for case in cases:
        try:
            if "tokenizer_config" in case:
                template, context = chat_context(case)
            else:
                template, context = case["template"], case.get("context", {})
            results.append({"ok": True, "text": env.from_string(template).render(**context)})
        except Exception as e:  # every failure is a result the C++ side must match
            results.append({"ok": False, "error": f"{type(e).__name__}: {e}"})
    json.dump(results, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()

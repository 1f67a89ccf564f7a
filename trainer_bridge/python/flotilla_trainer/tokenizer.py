"""Byte-level tokenizer and the one chat template, identical to the C++ engine's
(inference/include/flotilla/inference/tokenizer.h and chat_template.h)."""
import json

BOS, EOS, SYSTEM, USER, ASSISTANT, TOOL, END_TURN, TOOL_CALL_BEGIN, TOOL_CALL_END, PAD = range(256, 266)
VOCAB_SIZE = 272
SPECIAL_NAMES = {
    BOS: "<|bos|>", EOS: "<|eos|>", SYSTEM: "<|system|>", USER: "<|user|>",
    ASSISTANT: "<|assistant|>", TOOL: "<|tool|>", END_TURN: "<|end|>",
    TOOL_CALL_BEGIN: "<|tool_call|>", TOOL_CALL_END: "<|/tool_call|>", PAD: "<|pad|>",
}
ROLE_TOKENS = {"system": SYSTEM, "user": USER, "assistant": ASSISTANT, "tool": TOOL}


def encode(text):
    """Bytes of text (UTF-8) as ids; text never yields special tokens."""
    return list(text.encode("utf-8"))


def decode(ids, skip_special=False):
    out = bytearray()
    for i in ids:
        if 0 <= i < 256:
            out.append(i)
        elif not skip_special:
            out += SPECIAL_NAMES.get(i, "<|unk|>").encode()
    return out.decode("utf-8", errors="replace")


def tool_call_json(name, arguments_json):
    """The exact text of one tool call block's body (same bytes as the C++ side)."""
    return '{"name": ' + json.dumps(name) + ', "arguments": ' + arguments_json + '}'


def render_message(msg):
    """msg: dict(role, content, tool_calls=[{name, arguments(json text)}])."""
    ids = [ROLE_TOKENS[msg["role"]]] + encode(msg.get("content", ""))
    for call in msg.get("tool_calls", []) or []:
        ids += [TOOL_CALL_BEGIN] + encode(tool_call_json(call["name"], call["arguments"])) + [TOOL_CALL_END]
    return ids + [END_TURN]


def render_conversation(messages, add_generation_prompt=True):
    ids = [BOS]
    for m in messages:
        ids += render_message(m)
    if add_generation_prompt:
        ids.append(ASSISTANT)
    return ids

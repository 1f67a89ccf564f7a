#!/usr/bin/env python3
"""Deterministic corpus for the Hugging Face tokenizer golden tests (standard library only).

Writes JSON lines {"doc": i, "kind": ..., "text": ...} (ASCII, non-ASCII escaped) to the path
given, or prints the corpus' sha256 with --sha256. The same seed gives the same bytes on every
Python 3 version: the generator uses its own xorshift PRNG, never the `random` module.

The documents mix source code in several languages, English prose, CJK, emoji with ZWJ
sequences, combining marks, whitespace runs (tabs, CR/LF, trailing spaces, Unicode spaces),
digit runs and the special tokens of the Qwen3, DeepSeek-V3 and Llama-3 tokenizers embedded in
text, so every branch of their pre-tokenizer regexes and added-token matching is exercised.
"""
import hashlib
import json
import sys

MIN_BYTES = 1_100_000


class Rng:
    """xorshift64*: fixed, version-independent sequence."""

    def __init__(self, seed):
        self.s = (seed * 0x9E3779B97F4A7C15 + 1) & 0xFFFFFFFFFFFFFFFF

    def next(self):
        x = self.s
        x ^= (x >> 12)
        x ^= (x << 25) & 0xFFFFFFFFFFFFFFFF
        x ^= (x >> 27)
        self.s = x
        return (x * 0x2545F4914F6CDD1D) & 0xFFFFFFFFFFFFFFFF

    def below(self, n):
        return (self.next() >> 11) % n

    def pick(self, seq):
        return seq[self.below(len(seq))]

    def chance(self, num, den):
        return self.below(den) < num


WORDS = ("the of and to in is that it was for on are as with his they at be this from have or by "
         "one had not but what all were when we there can an your which their said if do will each "
         "about how up out them then she many some so these would other into has more her two like "
         "him see time could no make than first been its who now people my made over did down only "
         "way find use may water long little very after words called just where most know get "
         "through back much before go good new write our used me man too any day same right look "
         "think also around another came come work three word must because does part even place well "
         "such here take why things help put years different away again off went old number great "
         "tell men say small every found still between name should home big give air line set own "
         "under read last never us left end along while might next sound below saw something thought "
         "both few those always looked show large often together asked house don't world going want "
         "school important until form food keep children feet land side without boy once animals life "
         "enough took sometimes four head above kind began almost live page got earth need far hand "
         "high year mother light parts country father let night following picture being study second "
         "eyes soon times story boys since white days ever paper hard near sentence better best across "
         "during today others sure means knew it's try told young miles sun ways thing whole hear "
         "example heard several change answer room sea against top turned learn point city play toward "
         "five using himself usually tokenizer gradient scheduler sandbox trajectory rollout").split()
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ve", "'LL", "'D",
                "\u2019s", "'ſ", "'x", "''"]
PUNCT = [".", ",", ";", ":", "!", "?", "...", " -", " --", " \u2014", "\u2026", ")", "\"", "'"]
NAMES = ["Alice", "Bob", "DeepSeek", "Qwen", "Llama", "McDonald", "O'Brien", "iPhone", "GPT-4o",
         "São Paulo", "Zürich", "Ærøskøbing", "naïve", "Straße", "İstanbul", "KELVIN\u212a"]

CJK_ZH = ("我们在这里测试分词器的行为中文文本没有空格所以每个字都需要被正确地切分机器学习模型训练数据推理引擎"
          "强化学习智能体沙箱调度器轨迹异步训练专家混合注意力上下文长度北京上海深圳杭州龘靐齉爨")
CJK_JA_HIRA = "あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよらりるれろわをんがぎぐげござじずぜぞ"
CJK_JA_KATA = "アイウエオカキクケコサシスセソタチツテトナニヌネノハヒフヘホマミムメモヤユヨラリルレロワヲンヴーガギグゲゴ"
KO = "한국어텍스트는음절단위로구성됩니다토크나이저테스트입니다서울부산대구"
CYRILLIC = ["Привет", "мир", "токенизатор", "обучение", "модели", "Москва", "ёлка", "ЖУРНАЛ"]
GREEK = ["Καλημέρα", "κόσμε", "αλφάβητο", "Ωμέγα", "ΣΊΣΥΦΟΣ", "λόγος"]
ARABIC = ["مرحبا", "بالعالم", "تعلم", "الآلة", "٠١٢٣٤٥٦٧٨٩", "كتاب"]
HEBREW = ["שלום", "עולם", "מחשב"]
DEVANAGARI = ["नमस्ते", "दुनिया", "हिन्दी", "क्षत्रिय", "१२३४"]
THAI = ["สวัสดีครับ", "ภาษาไทย", "๑๒๓"]
MISC_SCRIPTS = ["ქართული", "Հայերեն", "ᚠᚢᚦᚨᚱᚲ", "ꦗꦮ", "ⲁⲃⲅ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "𝟙𝟚𝟛", "Ⅻ", "½¾", "²³", "①②"]

EMOJI = ["😀", "😂", "🥲", "🤖", "🚀", "🔥", "✨", "❤️", "👍", "👍🏽", "👋🏿", "🇺🇸", "🇯🇵", "🇩🇪",
         "👨\u200d👩\u200d👧\u200d👦", "🧑\u200d💻", "👩🏻\u200d🔬", "🏳️\u200d🌈", "❤️\u200d🔥",
         "🐈\u200d⬛", "1️⃣", "#️⃣", "©️", "™", "☕", "⚙️", "🧪", "🦀", "🐍", "𓀀"]
COMBINING = ["e\u0301", "a\u0308", "o\u0302\u0323", "n\u0303", "A\u030a", "c\u0327", "u\u0308\u0301",
             "\u1100\u1161\u11a8", "\u0915\u094d\u0937", "i\u0307", "z\u0336\u0336", "q\u0300\u0301\u0302\u0303",
             "\u0301", "\u05d1\u05bc", "\u0627\u064b", "\u212b", "\u2126", "\ufb01", "\u1e9b\u0323"]
SPACES = [" ", "  ", "   ", "\t", "\t\t", " \t ", "\n", "\n\n", "\r\n", "\r", "\n \n", " \n", "  \n  ",
          "\u00a0", "\u3000", "\u2009", "\u200b", "\u2028", "\u0085", "\u000b", "\u000c", "\u001f",
          "\u180e", "\u202f", "\ufeff"]
SPECIALS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>",
            "</tool_call>", "<|fim_prefix|>", "<|vision_pad|>", "<｜begin▁of▁sentence｜>",
            "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<｜tool▁calls▁begin｜>",
            "<｜tool▁sep｜>", "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>",
            "<|start_header_id|>", "<|end_header_id|>", "<|reserved_special_token_7|>",
            "<|python_tag|>", "<|im_start", "im_end|>", "<|endoftext|", "<｜begin▁of",
            "<|begin_of_text|><|begin_of_text|>", "<<|im_end|>>", "<|im_start|>assistant\n"]

CODE_PY = '''def {f}(xs: list[int], k: int = {n}) -> dict[str, float]:
    """Return the {w} of xs; k={n}."""
    out = {{}}
    for i, x in enumerate(xs):
\tif x % {m} == 0 and i < k:  # mixed tab indent
            out[f"{{i}}_{w}"] = x / {m}.0   
        elif x == 0x{h}:
            raise ValueError('bad value: %r' % (x,))
    return out


class {C}({C}Base):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._cache: "dict[str, int]" = {{}}
'''
CODE_CPP = '''#include <vector>
#include "flotilla/{w}.h"

namespace flotilla::{w} {{
// {C}::{f} returns {n} when the queue is empty.
absl::StatusOr<int64_t> {C}::{f}(const std::vector<int32_t>& ids) {{
  if (ids.empty()) return absl::InvalidArgumentError("{w}: ids[0] missing");
  int64_t sum = 0x{h}LL;
  for (size_t i = 0; i < ids.size(); ++i) {{
\tsum += ids[i] * {m};   
  }}
  return sum >> 3;  // {n}
}}
}}  // namespace flotilla::{w}
'''
CODE_RS = '''pub fn {f}<'a>(input: &'a str) -> Result<Vec<&'a str>, Box<dyn std::error::Error>> {{
    let mut v = Vec::with_capacity({n});
    for (i, c) in input.char_indices() {{
        if c.is_whitespace() && i % {m} == 0 {{ v.push(&input[..i]); }}
    }}
    println!("{{:?}} {w} {{}}", v, 0x{h}u64);
    Ok(v)
}}
'''
CODE_JS = '''export async function {f}(req, res) {{
  const {{ {w}, limit = {n} }} = req.query ?? {{}};
  const rows = await db.query(`SELECT * FROM {w} WHERE id > ${{limit}}`);
  return res.json({{ ok: true, count: rows.length, hex: 0x{h}, ratio: {n}/{m} }});
}}
'''
CODE_GO = '''func ({c} *{C}) {F}(ctx context.Context, n int) (int, error) {{
\tif n <= {m} {{
\t\treturn 0, fmt.Errorf("{w}: n=%d too small", n)
\t}}
\treturn n * {n}, nil
}}
'''
CODE_SH = '''#!/usr/bin/env bash
set -euo pipefail
for f in ./{w}/*.txt; do
  grep -E '^[0-9]{{3}}-{w}' "$f" | awk -F'\\t' '{{ print $2 }}' >> /tmp/{w}.out   
done
echo "done: $(wc -l < /tmp/{w}.out) lines" && exit {m}
'''
CODE_JSON = '''{{"model": "{w}", "max_tokens": {n}, "temperature": 0.{m}, "messages": [{{"role": "user", "content": "What's {w}?\\n\\tIt's {C}."}}], "tools": [{{"type": "function", "function": {{"name": "{f}", "parameters": {{"type": "object"}}}}}}]}}
'''
CODE_MD = '''## {C} {w}

| col | value | note |
|-----|------:|------|
| {f} | {n} | ~{m}% |
| hex | 0x{h} | **bold** _it_ `code` |

- [x] item {n}
- [ ] item {m}
> quote: "{w}" -- {C}
'''
CODES = [CODE_PY, CODE_CPP, CODE_RS, CODE_JS, CODE_GO, CODE_SH, CODE_JSON, CODE_MD]


def ident(r):
    w = r.pick(WORDS).replace("'", "")
    if r.chance(1, 2):
        w += "_" + r.pick(WORDS).replace("'", "")
    return w


def number(r):
    kind = r.below(8)
    if kind == 0:
        return str(r.below(10))
    if kind == 1:
        return str(r.below(10 ** (1 + r.below(18))))
    if kind == 2:
        return "%d.%0*d" % (r.below(1000), 1 + r.below(6), r.below(10 ** 5))
    if kind == 3:
        return "{:,}".format(r.below(10 ** 10))
    if kind == 4:
        return "0x%x" % r.next()
    if kind == 5:
        return "%d-%02d-%02dT%02d:%02d:%02dZ" % (1990 + r.below(40), 1 + r.below(12), 1 + r.below(28),
                                                r.below(24), r.below(60), r.below(60))
    if kind == 6:
        return "1" * (1 + r.below(12)) + "0" * r.below(9)
    return "-" + str(r.below(10 ** 7)) + "e-" + str(r.below(40))


def sentence(r):
    n = 4 + r.below(16)
    out = []
    for i in range(n):
        w = r.pick(WORDS)
        if i == 0:
            w = w[:1].upper() + w[1:]
        roll = r.below(40)
        if roll == 0:
            w = r.pick(NAMES)
        elif roll == 1:
            w = number(r)
        elif roll == 2:
            w = w + r.pick(CONTRACTIONS)
        elif roll == 3:
            w = w.upper()
        elif roll == 4:
            w = "(" + w + ")"
        elif roll == 5:
            w = '"' + w + '"'
        elif roll == 6:
            w = w + r.pick(EMOJI)
        elif roll == 7:
            w = r.pick(COMBINING) + w
        out.append(w)
        if r.chance(1, 12):
            out[-1] += r.pick(PUNCT[:3])
    return " ".join(out) + r.pick([".", ".", ".", "!", "?", "...", ":", ";"])


def prose(r):
    paras = []
    for _ in range(2 + r.below(5)):
        paras.append(" ".join(sentence(r) for _ in range(2 + r.below(6))))
    return r.pick(["\n\n", "\n", "\n\n\n", " \n\n", "\r\n\r\n"]).join(paras)


def code(r):
    return "\n".join(code_snippet(r) for _ in range(3 + r.below(8)))


def code_snippet(r):
    tmpl = r.pick(CODES)
    w = ident(r)
    f = ident(r)
    c = w[:1]
    C = "".join(p[:1].upper() + p[1:] for p in w.split("_"))
    body = tmpl.format(f=f, F=f[:1].upper() + f[1:], w=w, c=c, C=C, n=number(r).lstrip("-") or "0",
                       m=1 + r.below(97), h="%x" % r.below(1 << 32))
    if r.chance(1, 3):
        body = body.replace("    ", "\t")
    if r.chance(1, 4):
        body = body.replace("\n", "\r\n")
    return body


def cjk(r):
    parts = []
    for _ in range(20 + r.below(60)):
        roll = r.below(10)
        if roll < 4:
            parts.append("".join(r.pick(CJK_ZH) for _ in range(1 + r.below(12))))
        elif roll == 4:
            parts.append("".join(r.pick(CJK_JA_HIRA) for _ in range(1 + r.below(8))))
        elif roll == 5:
            parts.append("".join(r.pick(CJK_JA_KATA) for _ in range(1 + r.below(8))))
        elif roll == 6:
            parts.append("".join(r.pick(KO) for _ in range(1 + r.below(8))))
        elif roll == 7:
            parts.append(r.pick(["，", "。", "、", "！", "？", "「", "」", "：", "（", "）", "《", "》", "…", "—"]))
        elif roll == 8:
            parts.append(number(r))
        else:
            parts.append(r.pick(WORDS) + r.pick(["", " ", "\u3000"]))
    return "".join(parts)


def scripts(r):
    pools = [CYRILLIC, GREEK, ARABIC, HEBREW, DEVANAGARI, THAI, MISC_SCRIPTS, NAMES]
    out = []
    for _ in range(30 + r.below(60)):
        out.append(r.pick(r.pick(pools)))
        out.append(r.pick([" ", " ", ", ", ". ", "\n", " - ", "  "]))
    return "".join(out)


def emoji(r):
    out = []
    for _ in range(40 + r.below(80)):
        roll = r.below(6)
        if roll < 3:
            out.append(r.pick(EMOJI))
        elif roll == 3:
            out.append(r.pick(COMBINING))
        elif roll == 4:
            out.append(r.pick(WORDS))
        else:
            out.append(r.pick(SPACES))
    return "".join(out)


def whitespace(r):
    out = []
    for _ in range(60 + r.below(100)):
        roll = r.below(5)
        if roll < 2:
            out.append("".join(r.pick(SPACES) for _ in range(1 + r.below(6))))
        elif roll == 2:
            out.append(r.pick(WORDS))
        elif roll == 3:
            out.append(r.pick(PUNCT) + r.pick(SPACES))
        else:
            out.append(" " * r.below(20) + r.pick(WORDS) + " " * r.below(5))
    return "".join(out)


def digits(r):
    out = []
    for _ in range(40 + r.below(80)):
        roll = r.below(4)
        if roll == 0:
            out.append("".join(str(r.below(10)) for _ in range(1 + r.below(40))))
        elif roll == 1:
            out.append(number(r))
        elif roll == 2:
            out.append(r.pick(["٣", "४", "๕", "５", "½", "²", "Ⅸ", "①", "𝟘"]) * (1 + r.below(5)))
        else:
            out.append(r.pick([" ", ", ", "+", "-", "*", "/", "=", "\n", "\t", ".", "%", "$"]))
    return "".join(out)


def specials(r):
    out = []
    for _ in range(30 + r.below(60)):
        roll = r.below(6)
        if roll < 2:
            out.append(r.pick(SPECIALS))
        elif roll == 2:
            out.append(r.pick(SPACES))
        elif roll == 3:
            out.append(sentence(r))
        elif roll == 4:
            out.append(r.pick(COMBINING) + r.pick(SPECIALS) + r.pick(COMBINING))
        else:
            out.append(r.pick(["user", "assistant", "system", "\n", " ", "<", "|", "｜", ">", "▁"]))
    return "".join(out)


def random_codepoints(r):
    # Long-assigned ranges only, so differences between Unicode versions cannot matter.
    ranges = [(0x20, 0x7e), (0xa0, 0x24f), (0x370, 0x3ff), (0x400, 0x4ff), (0x590, 0x5ff),
              (0x600, 0x6ff), (0x900, 0x97f), (0x2000, 0x206f), (0x2100, 0x22ff), (0x3040, 0x30ff),
              (0x4e00, 0x9fa5), (0xac00, 0xd7a3), (0xff00, 0xffef), (0x1f300, 0x1f64f)]
    out = []
    for _ in range(200 + r.below(400)):
        lo, hi = r.pick(ranges)
        cp = lo + r.below(hi - lo + 1)
        if 0x2060 <= cp <= 0x206f or 0xfff0 <= cp:
            cp = 0x20
        out.append(chr(cp))
    return "".join(out)


KINDS = [("prose", prose), ("code", code), ("cjk", cjk), ("scripts", scripts), ("emoji", emoji),
         ("whitespace", whitespace), ("digits", digits), ("specials", specials),
         ("codepoints", random_codepoints), ("mixed", None)]


def document(i):
    r = Rng(1000 + i)
    name, fn = KINDS[i % len(KINDS)]
    if fn is None:
        text = "".join(KINDS[r.below(len(KINDS) - 1)][1](r) for _ in range(3))
    else:
        text = "".join(fn(r) for _ in range(1 + r.below(3)))
    # Edges of the pre-tokenizer: leading/trailing whitespace and pieces ending a document.
    if i % 7 == 0:
        text = r.pick(SPACES) + text
    if i % 5 == 0:
        text = text + r.pick(SPACES)
    return name, text


def edge_documents():
    yield "edge", ""
    yield "edge", " "
    yield "edge", "\n"
    yield "edge", "a"
    yield "edge", "   trailing   "
    yield "edge", "Hello world! It's 2024, isn'T it? I'LL go; we'd've."
    yield "edge", "x" * 3000
    yield "edge", " " * 500 + "\n" * 20 + "\t" * 30
    yield "edge", "1234567890" * 30
    yield "edge", "".join(SPECIALS)
    yield "edge", "🙂" * 300
    yield "edge", "\u0301\u0301\u0301e\u0301"
    yield "edge", "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHello"
    yield "edge", "<｜begin▁of▁sentence｜><｜User｜>1+1=?<｜Assistant｜></think>2<｜end▁of▁sentence｜>"
    yield "edge", "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"


def documents():
    docs = list(edge_documents())
    total = sum(len(t.encode()) for _, t in docs)
    i = 0
    while total < MIN_BYTES:
        kind, text = document(i)
        docs.append((kind, text))
        total += len(text.encode())
        i += 1
    return docs


def serialize():
    lines = []
    for i, (kind, text) in enumerate(documents()):
        lines.append(json.dumps({"doc": i, "kind": kind, "text": text}, ensure_ascii=True))
    return ("\n".join(lines) + "\n").encode("ascii")


def main():
    data = serialize()
    if len(sys.argv) == 2 and sys.argv[1] == "--sha256":
        print(hashlib.sha256(data).hexdigest())
        return
    if len(sys.argv) != 2:
        sys.exit("usage: tokenizer_corpus.py OUT.jsonl | --sha256")
    with open(sys.argv[1], "wb") as f:
        f.write(data)


if __name__ == "__main__":
    main()

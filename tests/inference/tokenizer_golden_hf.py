#!/usr/bin/env python3
"""Makes the tokenizer goldens with the Hugging Face `tokenizers` library (run where it is
installed; it is not on the build machines). Usage:

  tokenizer_golden_hf.py CORPUS.jsonl OUT_DIR NAME=path/to/tokenizer.json...

For each NAME it writes OUT_DIR/NAME.golden.json.gz: the library's version, the sha256 of the
tokenizer.json and of the corpus, and per document the ids of encode(text,
add_special_tokens=False); "ids_split_special" where encoding with encode_special_tokens=True
(special tokens read as plain text) gives other ids; and the sha256 of decode(ids) with and
without skip_special_tokens. Also prints each tokenizer's single-threaded encode time.
"""
import gzip
import hashlib
import json
import sys
import time

import tokenizers


def sha(data):
    return hashlib.sha256(data).hexdigest()


def main():
    corpus_path, out_dir, specs = sys.argv[1], sys.argv[2], sys.argv[3:]
    raw = open(corpus_path, "rb").read()
    docs = [json.loads(line)["text"] for line in raw.decode("ascii").splitlines()]
    nbytes = sum(len(t.encode()) for t in docs)
    for spec in specs:
        name, path = spec.split("=", 1)
        tok = tokenizers.Tokenizer.from_file(path)
        t0 = time.perf_counter()
        encs = [tok.encode(t, add_special_tokens=False).ids for t in docs]
        dt = time.perf_counter() - t0
        tok.encode_special_tokens = True
        split = [tok.encode(t, add_special_tokens=False).ids for t in docs]
        tok.encode_special_tokens = False
        out = []
        for ids, ids2 in zip(encs, split):
            d = {"ids": ids,
                 "decode_sha256": sha(tok.decode(ids, skip_special_tokens=False).encode()),
                 "decode_skip_sha256": sha(tok.decode(ids, skip_special_tokens=True).encode())}
            if ids2 != ids:
                d["ids_split_special"] = ids2
            out.append(d)
        golden = {"tokenizer": name, "tokenizers_version": tokenizers.__version__,
                  "tokenizer_json_sha256": sha(open(path, "rb").read()),
                  "corpus_sha256": sha(raw), "docs": out}
        with gzip.GzipFile(f"{out_dir}/{name}.golden.json.gz", "wb", compresslevel=9, mtime=0) as f:
            f.write(json.dumps(golden, separators=(",", ":")).encode())
        ntok = sum(len(i) for i in encs)
        print(f"{name}: docs={len(docs)} bytes={nbytes} tokens={ntok} hf_encode_s={dt:.3f} "
              f"hf_mb_per_s={nbytes / dt / 1e6:.2f} tokenizers={tokenizers.__version__}", flush=True)


if __name__ == "__main__":
    main()

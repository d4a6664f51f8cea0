"""Seeded JSON schemas for measuring xgrammar's compile time against finspace.structured.cost's figure.

Each schema mixes what makes a grammar costly: bounded strings (maxLength), patterns with nested counted
repetitions over literals and classes of every width, enums, number ranges, nested objects, arrays and anyOf
alternatives inside alternatives, and $defs referenced from several places. Sizes are drawn so that the figures
spread from trivial to several times the bound: the bound is tried on both sides.
"""

from __future__ import annotations

import random

CLASSES = ["a", "[0-9]", "[A-Z]", "[a-z]", "\\w", "[a-zA-Z0-9 ]", "[^\"]", ".", "\\d", "(ab|cd)", "[A-Z]{2}"]
COUNTS = [1, 2, 3, 4, 8, 16, 32, 64]
LENGTHS = [5, 10, 20, 40, 80, 120, 200, 300]


def pattern(rng: random.Random) -> str:
    body = rng.choice(CLASSES)
    for _ in range(rng.choice([0, 1, 1, 2, 3])):
        n = rng.choice(COUNTS)
        body = f"({body}){{{n}}}" if rng.random() < 0.7 else f"({body}){{1,{n}}}"
    if rng.random() < 0.3:
        body = f"{body}|{rng.choice(CLASSES)}+"
    return f"^{body}$"


def leaf(rng: random.Random) -> dict:
    kind = rng.random()
    if kind < 0.3:
        return {"type": "string", "pattern": pattern(rng)}
    if kind < 0.5:
        return {"type": "string", "minLength": 1, "maxLength": rng.choice(LENGTHS)}
    if kind < 0.6:
        return {"enum": [f"v{i}-{'x' * rng.randint(1, 20)}" for i in range(rng.randint(1, 40))]}
    if kind < 0.75:
        low = rng.randint(-1000, 1000)
        return {"type": rng.choice(["integer", "number"]), "minimum": low, "maximum": low + rng.randint(0, 10**6)}
    if kind < 0.85:
        return {"type": "string", "format": rng.choice(["date", "email", "uri", "uuid", "date-time", "hostname"])}
    return {"type": rng.choice(["boolean", "string", "null"])}


def node(rng: random.Random, depth: int, refs: list[str]) -> dict:
    r = rng.random()
    if depth >= 3 or r < 0.35:
        return {"$ref": f"#/$defs/{rng.choice(refs)}"} if refs and rng.random() < 0.15 else leaf(rng)
    if r < 0.65:
        n = rng.choice([1, 2, 3, 4, 8, 16] if depth else [1, 4, 8, 16, 32, 48])
        props = {f"p{depth}_{i}": node(rng, depth + 1, refs) for i in range(n)}
        return {
            "type": "object",
            "properties": props,
            "required": sorted(props)[: rng.randint(0, n)],
            "additionalProperties": False,
        }
    if r < 0.8:
        return {"type": "array", "items": node(rng, depth + 1, refs), "maxItems": rng.choice([2, 5, 20])}
    return {"anyOf": [node(rng, depth + 1, refs) for _ in range(rng.choice([2, 3, 4, 8, 16]))]}


def schema(seed: int) -> dict:
    """One schema; the same seed gives the same schema."""
    rng = random.Random(seed)
    defs = {f"d{i}": leaf(rng) for i in range(rng.choice([0, 0, 1, 3]))}
    out = node(rng, 0, sorted(defs))
    if out.get("type") != "object":
        out = {"type": "object", "properties": {"answer": out}, "required": ["answer"]}
    if defs:
        out["$defs"] = defs
    return out


def compiler(tokenizer_dir: str):
    """xgrammar's compiler as vLLM's xgrammar backend builds it (8 threads), without its cache: each schema is
    compiled, none is remembered."""
    import xgrammar as xgr
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=len(tok))
    return xgr.GrammarCompiler(info, max_threads=8, cache_enabled=False)


def compile_s(comp, schema_: dict) -> float:
    """Seconds to compile ``schema_`` as vLLM does (compact JSON: finspace's engine sets disable_any_whitespace)."""
    import json
    import time

    t0 = time.perf_counter()
    comp.compile_json_schema(json.dumps(schema_), any_whitespace=False, separators=(",", ":"))
    return time.perf_counter() - t0


def fuzz(comp, seeds, check, cost) -> dict:
    """Every seed's schema checked (``check``: finspace's, raising on refusal), its figure (``cost``), and the
    compile time of each accepted one. Returns the rows and the worst accepted."""
    rows = []
    for seed in seeds:
        s = schema(seed)
        try:
            check(s)
            accepted = True
        except Exception:  # noqa: BLE001 - a refusal: not compiled (a refused schema may take minutes)
            accepted = False
        rows.append(
            {"seed": seed, "cost": cost(s), "accepted": accepted, "compile_s": compile_s(comp, s) if accepted else None}
        )
    ok = [r for r in rows if r["accepted"]]
    worst = max(ok, key=lambda r: r["compile_s"], default=None)
    return {"rows": rows, "accepted": len(ok), "worst": worst}

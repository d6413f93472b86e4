"""The table and JSON of a VAE bench (the decoders' bench_vae.sh and
bench_vae22.sh, the encoder's bench_vae_enc.sh): ours (the gpu test's
--bench lines, DIR/ours.jsonl) paired with the published code's runs
(torch_vae*.py --json-out, DIR/torch.json).

    bench_vae_report.py DIR OUT_JSON BENCH PAIRS [SIZE_KEY [OURS_S]]

BENCH names the bench in the JSON ("vae", "vae22"); PAIRS lists the rows
of each latent as OURS:PUBLISHED precisions, comma-separated
("bf16:bf16,fp32:fp32-strict,fp32:fp32"). Prints a table (header lines
start with '#'), ours' time per op for every pair but our fp32 against
torch's default fp32, then the JSON, which OUT_JSON gets too. SIZE_KEY
is the field both sides name their size by (default "latent", the
decoders'; the encoder's "video"), OURS_S our time's field (default
"decode_s"; the encoder's "encode_s")."""
import json
import os
import sys


def main():
    d, out, bench, pairs = sys.argv[1:5]
    size_key = sys.argv[5] if len(sys.argv) > 5 else "latent"
    ours_s = sys.argv[6] if len(sys.argv) > 6 else "decode_s"
    pairs = [tuple(p.split(":")) for p in pairs.split(",")]
    ours = {}
    for line in open(f"{d}/ours.jsonl"):
        r = json.loads(line)
        ours[(tuple(r[size_key]), r["precision"])] = r
    torch, env = {}, {}
    if os.path.exists(f"{d}/torch.json"):
        t = json.load(open(f"{d}/torch.json"))
        env = t.get("env", {})
        for r in t.get("results", []):
            if r.get("status") == "ok":
                torch[(tuple(r[size_key]), r["mode"])] = r
    rows = []
    for L in sorted({k[0] for k in ours} | {k[0] for k in torch}):
        for prec, tmode in pairs:
            o, t = ours.get((L, prec)), torch.get((L, tmode))
            row = {size_key: list(L), "ours": prec, "published": tmode,
                   "ours_s": o and o[ours_s], "ours_gib": o and o["layout_gib"],
                   "ours_used_gib": o and o["used_gib"],
                   "published_s": t and t["s"], "published_gib": t and t["peak_gib"],
                   "ops_ms": o and o["ops_ms"]}
            if o and t:
                row["time_ratio"] = o[ours_s] / t["s"]
                row["mem_ratio"] = o["layout_gib"] / t["peak_gib"]
            rows.append(row)
    f = lambda v, p=".3f": format(v, p) if isinstance(v, (int, float)) else "-"
    print(f"# published: torch {env.get('torch', '?')}, cudnn {env.get('cudnn', '?')}, "
          f"{env.get('gpu', '?')}")
    print(f"# {size_key:>10} {'ours':>5} {'published':>12} {'ours s':>8} {'pub s':>8} "
          f"{'ratio':>6} {'ours GiB':>9} {'used GiB':>9} {'pub GiB':>8} {'mem ratio':>9}")
    for r in rows:
        print(f"  {'x'.join(map(str, r[size_key])):>10} {r['ours']:>5} {r['published']:>12} "
              f"{f(r['ours_s']):>8} {f(r['published_s']):>8} {f(r.get('time_ratio'), '.2f'):>6} "
              f"{f(r['ours_gib'], '.2f'):>9} {f(r['ours_used_gib'], '.2f'):>9} "
              f"{f(r['published_gib'], '.2f'):>8} {f(r.get('mem_ratio'), '.2f'):>9}")
    for r in rows:
        if r["ours_s"] is not None and not (r["ours"] == "fp32" and r["published"] == "fp32"):
            ops = ", ".join(f"{k} {v:.0f}" for k, v in r["ops_ms"].items())
            print(f"# ours {'x'.join(map(str, r[size_key]))} {r['ours']}, ms per op (one "
                  f"profiled run): {ops}")
    doc = {"bench": bench, "published_env": env, "rows": rows}
    tmp = out + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(doc, fh)
        fh.write("\n")
    os.replace(tmp, out)
    print(json.dumps(doc))


if __name__ == "__main__":
    main()

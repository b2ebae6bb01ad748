#!/usr/bin/env python3
"""best_of_runs.py -- several bench_ggml tables combined into one, each time column the best
of the runs (and each run's own fast/ggml ratio beside it), for a machine too noisy for one
run. Standard library only.

    for i in 1 2 3; do build-bench/bench_ggml --reps 30 > run$i.txt; done
    bench/best_of_runs.py run1.txt run2.txt run3.txt
"""
import sys


def rows(path):
    for line in open(path):
        if not line.startswith('| ') or line.startswith('| shape') or '---' in line:
            continue
        c = [x.strip() for x in line.strip().strip('|').split('|')]
        num = lambda s: float(s) if s else None
        yield tuple(c[:5]), dict(ggml=num(c[5]), exact=num(c[6]), fast=num(c[7]), read=num(c[10]),
                                 fast_gbs=num(c[11]), ggml_gbs=num(c[13]))


def main(paths):
    if not paths:
        sys.exit(__doc__)
    cells = {}
    for p in paths:
        for key, v in rows(p):
            cells.setdefault(key, []).append(v)
    print('| shape (NxK)  |  M | T | type   | qtk scheme                   | ggml ms | exact ms | fast ms | exact/ggml '
          '| fast/ggml | fast/ggml per run | read GB/s | fast GB/s | roof | ggml GB/s |')
    print('|--------------|----|---|--------|------------------------------|---------|----------|---------|------------'
          '|-----------|-------------------|-----------|-----------|------|-----------|')
    for key, vs in cells.items():
        g = min(v['ggml'] for v in vs)
        e = min(v['exact'] for v in vs)
        f = min(v['fast'] for v in vs)
        per = '/'.join('%.2f' % (v['fast'] / v['ggml']) for v in vs)
        tail = '%9s | %9s | %4s | %9s' % ('', '', '', '')
        if vs[0]['read'] is not None:
            qbytes = vs[0]['fast_gbs'] * vs[0]['fast'] * 1e6  # bytes of qtk's weights
            gbytes = vs[0]['ggml_gbs'] * vs[0]['ggml'] * 1e6
            rd = max(v['read'] for v in vs)
            fg = qbytes / (f * 1e-3) / 1e9
            tail = '%9.2f | %9.2f | %4.2f | %9.2f' % (rd, fg, fg / rd, gbytes / (g * 1e-3) / 1e9)
        print('| %-12s | %2s | %s | %-6s | %-28s | %7.3f | %8.3f | %7.3f | %10.2f | %9.2f | %-17s | %s |'
              % (key + (g, e, f, e / g, f / g, per, tail)))


if __name__ == '__main__':
    main(sys.argv[1:])

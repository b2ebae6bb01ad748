#!/usr/bin/env python3
"""qemu_insn_count.py — guest instructions executed by a command under qemu-user.

    qemu-aarch64-static -d in_asm,exec,nochain -D LOG PROGRAM ARGS...
    bench/qemu_insn_count.py LOG

prints the number of guest instructions executed: the sum, over every execution of a
translation block ("Trace" lines; nochain logs each one), of the block's instruction count
(its "IN:" listing). Counts are exact and the same on every run of the same binary and input,
whatever the host is doing; bench/arm_insn.sh uses them per element and per weight."""
import re
import sys


def count(path):
    size = {}
    total = 0
    cur_pc, cur_n = None, 0
    in_block = False
    pc_re = re.compile(r'^0x([0-9a-f]+):\s')
    trace_re = re.compile(r'^Trace \d+: 0x[0-9a-f]+ \[[0-9a-f]+/([0-9a-f]+)/')
    with open(path, errors='replace') as f:
        for line in f:
            if line.startswith('IN:'):
                in_block, cur_pc, cur_n = True, None, 0
                continue
            if in_block:
                m = pc_re.match(line)
                if m:
                    if cur_pc is None:
                        cur_pc = int(m.group(1), 16)
                    cur_n += 1
                    continue
                if cur_pc is not None:
                    size[cur_pc] = cur_n
                in_block = False
            m = trace_re.match(line)
            if m:
                total += size.get(int(m.group(1), 16), 0)
    return total


if __name__ == '__main__':
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    print(count(sys.argv[1]))

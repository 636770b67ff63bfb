#!/usr/bin/env python3
"""Build helper: embeds a file as a NUL-terminated C char array.

    embed.py INPUT OUTPUT SYMBOL   defines SYMBOL[] and size_t SYMBOL_len
"""
import sys

src, out, sym = sys.argv[1], sys.argv[2], sys.argv[3]
data = open(src, 'rb').read()
with open(out, 'w') as f:
    f.write('/* Generated from %s by scripts/embed.py; do not edit. */\n' % src.split('/')[-1])
    f.write('#include <stddef.h>\n')
    f.write('extern const char %s[];\nextern const size_t %s_len;\n' % (sym, sym))
    f.write('const char %s[] = {\n' % sym)
    for i in range(0, len(data), 16):
        f.write('\t' + ' '.join('(char)0x%02x,' % b if b > 0x7f else '0x%02x,' % b for b in data[i:i + 16]) + '\n')
    f.write('\t0x00\n};\nconst size_t %s_len = %d;\n' % (sym, len(data)))

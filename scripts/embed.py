#!/usr/bin/env python3
"""Build helper: embeds a file as a NUL-terminated C char array, and puts
threadcast's Redis function libraries together.

    embed.py INPUT OUTPUT SYMBOL
        defines SYMBOL[] and size_t SYMBOL_len from INPUT
    embed.py --libraries OUTPUT SYMBOL BASE LIBRARY...
        the same for the Redis function libraries BASE and LIBRARY..., one
        after another, each assembled as --library does (tc_redis_new() loads
        every library of such a text; store.h's tc_store_library_next()
        splits it)
    embed.py --library BASE LIBRARY
        prints LIBRARY assembled: BASE's shared prelude (the lines from the
        banner "-- ==== the shared prelude" to the banner "-- ==== end of
        the shared prelude", both included) put after its first line, the
        `#!lua name=...` line. BASE itself prints as it is: it holds the
        prelude already. protocol/redis/threadcast.lua is BASE.

The prelude is written once, in BASE, and copied here only: a function of one
Redis library cannot call another library's local functions.
"""
import sys

PRELUDE_BEGIN = '-- ==== the shared prelude'
PRELUDE_END = '-- ==== end of the shared prelude'


def fail(msg):
    sys.exit('embed.py: ' + msg)


def read(path):
    with open(path, encoding='utf-8') as f:
        return f.read()


def prelude(base_path):
    lines = read(base_path).splitlines(keepends=True)
    begin = [i for i, l in enumerate(lines) if l.startswith(PRELUDE_BEGIN)]
    end = [i for i, l in enumerate(lines) if l.startswith(PRELUDE_END)]
    if len(begin) != 1 or len(end) != 1 or end[0] < begin[0]:
        fail('%s must have one shared prelude, between the banners "%s" and "%s"'
             % (base_path, PRELUDE_BEGIN, PRELUDE_END))
    return ''.join(lines[begin[0]:end[0] + 1])


def library(base_path, path):
    """The library at path, ready for FUNCTION LOAD."""
    text = read(path)
    if not text.startswith('#!lua name='):
        fail(path + ' must start with its "#!lua name=..." line')
    if not text.endswith('\n'):
        text += '\n'
    if path != base_path:
        first, rest = text.split('\n', 1)
        text = first + '\n' + prelude(base_path) + rest
    # Libraries are told apart by their first line (tc_store_library_next).
    if '\n#!lua' in text:
        fail(path + ': only its first line may start with "#!lua"')
    return text


def embed(data, out, sym, name):
    with open(out, 'w') as f:
        f.write('/* Generated from %s by scripts/embed.py; do not edit. */\n' % name)
        f.write('#include <stddef.h>\n')
        f.write('extern const char %s[];\nextern const size_t %s_len;\n' % (sym, sym))
        f.write('const char %s[] = {\n' % sym)
        for i in range(0, len(data), 16):
            f.write('\t' + ' '.join('(char)0x%02x,' % b if b > 0x7f else '0x%02x,' % b
                                    for b in data[i:i + 16]) + '\n')
        f.write('\t0x00\n};\nconst size_t %s_len = %d;\n' % (sym, len(data)))


args = sys.argv[1:]
if args[:1] == ['--library'] and len(args) == 3:
    sys.stdout.write(library(args[1], args[2]))
elif args[:1] == ['--libraries'] and len(args) >= 4:
    out, sym, base, libs = args[1], args[2], args[3], args[4:]
    text = ''.join(library(base, p) for p in [base] + libs)
    embed(text.encode('utf-8'), out, sym, ', '.join(p.split('/')[-1] for p in [base] + libs))
elif len(args) == 3 and not args[0].startswith('--'):
    embed(open(args[0], 'rb').read(), args[1], args[2], args[0].split('/')[-1])
else:
    fail('usage: see the comment at the top of scripts/embed.py')

#!/usr/bin/env python3
"""Write a text file as a C string: embed.py IN OUT NAME gives OUT holding
`const char NAME[] = "...";` (the build embeds cli/serve/page.html so the
server needs no files at run time)."""
import sys


def c_string_lines(data):
    for line in data.splitlines(keepends=True):
        out = []
        for ch in line.encode("utf-8"):
            c = chr(ch)
            if c == "\\":
                out.append("\\\\")
            elif c == '"':
                out.append('\\"')
            elif c == "\n":
                out.append("\\n")
            elif c == "?":
                out.append("\\?")  # no trigraphs
            elif 0x20 <= ch < 0x7F:
                out.append(c)
            else:
                out.append("\\%03o" % ch)
        yield '    "' + "".join(out) + '"\n'


def main():
    src, dst, name = sys.argv[1:4]
    with open(src, encoding="utf-8") as f:
        data = f.read()
    with open(dst, "w") as f:
        f.write(f"/* Generated from {src.split('/')[-1]} by embed.py: do not edit. */\n")
        f.write(f"const char {name}[] =\n")
        f.writelines(c_string_lines(data))
        f.write(";\n")


if __name__ == "__main__":
    main()

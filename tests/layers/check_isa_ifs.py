#!/usr/bin/env python3
"""Fails on any #if on an instruction set inside a function or class body under include/ember.

ember selects the kernel of an instruction set at namespace scope: one definition per instruction
set under #if / #else, or a namespace alias (docs/reading-the-code.md). This check parses every
header under the root (include/ember by default), comments and string literals removed, follows
the braces, and reports each #if, #ifdef, #ifndef or #elif that names an instruction-set macro
(__AVX2__, __F16C__, __x86_64__, __ARM_NEON, EMBER_DETAIL_*_AVX2, ...) inside braces other than a
namespace's or an extern "C" block's, as file:line. Exit status 1 if there is any such site.

Usage: check_isa_ifs.py [--root DIR] [EXTRA_FILE ...]
  --root DIR   the headers to check (every *.hpp below it); default: include/ember of this tree
  EXTRA_FILE   further files to check as well (a fixture that must be reported)
"""
import argparse
import os
import re
import sys

# The macros that name an instruction set or an architecture: the compilers' own, and ember's
# EMBER_DETAIL_* switches derived from them.
ISA_MACRO = re.compile(
    r"^(__(AVX|SSE|SSSE|F16C|FMA|BMI|LZCNT|POPCNT|ARM_NEON|ARM_FEATURE|aarch64|x86_64|i386|arm)\w*"
    r"|_M_(X64|IX86|ARM64|ARM)"
    r"|EMBER_DETAIL_\w*(AVX|SSE|NEON|VNNI|F16C|FMA)\w*"
    r"|EMBER_ISA_\w+)$")
CONDITIONAL = re.compile(r"^\s*#\s*(if|ifdef|ifndef|elif|elifdef|elifndef)\b(.*)$")
IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
SCOPE_OPENER = re.compile(r'(\bnamespace\b[^;{}()]*|\bextern\s*""\s*)$')


def strip_comments_and_strings(text):
    """The text with comments and the contents of string and character literals removed; every
    newline kept, so that line numbers stay."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        nxt = text[i + 1] if i + 1 < n else ""
        if c == "/" and nxt == "/":
            while i < n and text[i] != "\n":
                i += 1
        elif c == "/" and nxt == "*":
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append("\n" * text.count("\n", i, end) or " ")
            i = end
        elif c == "R" and nxt == '"' and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            open_paren = text.find("(", i + 2)
            delim = text[i + 2:open_paren]
            end = text.find(")" + delim + '"', open_paren)
            end = n if end < 0 else end + len(delim) + 2
            out.append('""' + "\n" * text.count("\n", i, end))
            i = end
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def isa_sites(path, shown):
    """(shown:line, directive) for each #if on an instruction set inside a body in `path`."""
    with open(path, encoding="utf-8") as f:
        lines = strip_comments_and_strings(f.read()).split("\n")
    sites = []
    scopes = []  # True for a namespace or extern "C" brace, False for any other
    pending = ""  # the code since the last ';', '{' or '}'
    continued = False
    for number, line in enumerate(lines, 1):
        if continued or line.lstrip().startswith("#"):
            match = None if continued else CONDITIONAL.match(line)
            if match and not all(scopes):
                names = IDENTIFIER.findall(match.group(2))
                # The condition may go on over continued lines.
                k = number
                while lines[k - 1].rstrip().endswith("\\") and k < len(lines):
                    names += IDENTIFIER.findall(lines[k])
                    k += 1
                if any(ISA_MACRO.match(name) for name in names):
                    sites.append(f"{shown}:{number}: {line.strip()}")
            continued = line.rstrip().endswith("\\")
            continue
        for ch in line:
            if ch == "{":
                scopes.append(bool(SCOPE_OPENER.search(pending.strip())))
                pending = ""
            elif ch == "}":
                if scopes:
                    scopes.pop()
                pending = ""
            elif ch == ";":
                pending = ""
            else:
                pending += ch
        pending += " "
    return sites


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--root", default=os.path.join(here, "..", "..", "include", "ember"))
    parser.add_argument("extra", nargs="*")
    args = parser.parse_args()
    root = os.path.normpath(args.root)
    files = []
    for directory, _, names in os.walk(root):
        files += [os.path.join(directory, name) for name in names if name.endswith(".hpp")]
    files.sort()
    if not files:
        print(f"check_isa_ifs: no headers under {root}")
        return 1
    base = os.path.dirname(os.path.dirname(root))  # the tree holding include/ember
    sites = []
    for path in files:
        sites += isa_sites(path, os.path.relpath(path, base))
    for path in args.extra:
        sites += isa_sites(path, path)
    for site in sites:
        print(site)
    if sites:
        print(f"check_isa_ifs: {len(sites)} #if on an instruction set inside a function or class "
              "body; select the kernel at namespace scope instead")
        return 1
    print(f"check_isa_ifs: no #if on an instruction set inside a function or class body in "
          f"{len(files) + len(args.extra)} files under {os.path.relpath(root, base)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

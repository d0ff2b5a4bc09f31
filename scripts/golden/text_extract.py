#!/usr/bin/env python3
"""Extract plain UTF-8 prose from Python 3.11 tutorial reStructuredText sources.

Used by gen_golden.py to build tests/golden/text_en.txt. Deterministic: the same
.rst.txt input always gives the same text. Only the small rst subset found in the
tutorial's prose chapters is handled: section titles (over/underlined), comments and
directives (dropped with their indented bodies), literal blocks after "::" (dropped),
doctest lines (dropped), bullet lists (kept as "- item"), inline roles/markup (reduced
to their visible text), and "---" (rendered as an em dash, as Sphinx does).

Output: paragraphs as single lines (internal whitespace collapsed to one space),
separated by one blank line, final newline.
"""
import re
import sys

TITLE_RE = re.compile(r'^([*=\-~^#"+])\1{3,}\s*$')
# :ref:`label` without an explicit title renders as the target section's title; the
# labels used in the extracted paragraphs are listed here.
REF_TITLES = {"tut-private": "Private Variables"}


def _inline(s):
    # :role:`Text <target>` -> Text ; :role:`target` -> target
    s = re.sub(r':[a-zA-Z:]+:`([^`<]*?)\s*<[^`>]*>`', r'\1', s)
    s = re.sub(r':ref:`([^`]*)`', lambda m: REF_TITLES.get(m.group(1), m.group(1)), s)
    s = re.sub(r':[a-zA-Z:]+:`~?([^`]*)`', r'\1', s)
    s = re.sub(r'``([^`]*)``', r'\1', s)          # inline literal
    s = re.sub(r'`([^`<]*?)\s*<[^`>]*>`_+', r'\1', s)  # hyperlink refs
    s = re.sub(r'`([^`]*)`', r'\1', s)            # default role
    s = re.sub(r'\s*\[#\w*\]_', '', s)           # footnote refs
    s = re.sub(r'\*\*([^*]+)\*\*', r'\1', s)      # strong
    s = re.sub(r'(?<![\w*])\*([^*\s][^*]*?)\*(?![\w*])', r'\1', s)  # emphasis
    s = s.replace('---', '\u2014')
    s = re.sub(r'\s+', ' ', s).strip()
    if s.endswith('::'):  # "text::" introduces a literal block; Sphinx shows "text:"
        s = s[:-2].rstrip()
        s = s + ':' if s else s
    return s


def rst_to_paragraphs(src):
    """Return a list of plain-text paragraphs (titles included) from rst source text."""
    lines = src.splitlines()
    paras = []
    cur = []
    i = 0
    skip_indent = None  # drop indented block after a directive or '::'

    def flush():
        if cur:
            p = _inline(' '.join(cur))
            if p:
                paras.append(p)
            cur.clear()

    while i < len(lines):
        line = lines[i].rstrip('\n')
        stripped = line.strip()
        indent = len(line) - len(line.lstrip(' '))
        if skip_indent is not None:
            if stripped == '' or indent > skip_indent:
                i += 1
                continue
            skip_indent = None
        if stripped == '':
            flush()
            i += 1
            continue
        if TITLE_RE.match(stripped):
            # overline or underline: the title text is in cur (underline) or next line
            if cur:
                title = ' '.join(cur)
                cur.clear()
                paras.append(_inline(title))
            elif i + 2 < len(lines) and TITLE_RE.match(lines[i + 2].strip()):
                paras.append(_inline(lines[i + 1].strip()))
                i += 3
                continue
            i += 1
            continue
        if stripped.startswith('.. '):
            flush()
            skip_indent = indent
            i += 1
            continue
        if stripped.startswith('>>>') or stripped.startswith('...'):
            i += 1
            continue
        if stripped.startswith('* ') or stripped.startswith('- '):
            flush()
            cur.append('- ' + stripped[2:])
            i += 1
            continue
        cur.append(stripped)
        if stripped.endswith('::'):
            flush()
            skip_indent = indent
        i += 1
    flush()
    return paras


def main(argv):
    out = []
    for path in argv[1:]:
        with open(path, encoding='utf-8') as f:
            out.extend(rst_to_paragraphs(f.read()))
    sys.stdout.write('\n\n'.join(out) + '\n')


if __name__ == '__main__':
    main(sys.argv)

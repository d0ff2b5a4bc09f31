#!/usr/bin/env python3
"""extract_corpus.py — builds data/corpus_en.txt, the English prose used for perplexity.

Source: the reStructuredText sources of the Python 3.11 tutorial and FAQ shipped by the Debian
package python3.11-doc (/usr/share/doc/python3.11/html/_sources/{tutorial,faq}/*.rst.txt).

Output: plain UTF-8 paragraphs, one per line group, separated by one blank line, in the fixed
file order of FILES below (the tutorial's reading order). Markup is removed:
  - section adornment lines, labels (.. _x:), comments and every directive with its indented
    body, except admonitions whose body is prose (note, tip, seealso, warning, ...), which are
    kept as ordinary paragraphs;
  - literal blocks (the indented block after a paragraph ending in "::"), doctest paragraphs
    (">>>"), any other indented block (block quotes are code in this text) and tables;
  - inline markup: roles (:func:`~a.b` -> b, :ref:`title <label>` -> title), ``literals``,
    *emphasis*, **strong**, `links <url>`_, footnote references.
Paragraph lines are joined with single spaces. The result is checked against a pinned sha256
(EXPECTED_SHA256); a mismatch (for example a different package version) fails loudly and
leaves no output file, so every perplexity number is computed on the same bytes.

Usage: scripts/extract_corpus.py [--src DIR] [--out FILE] [--no-check]
"""
import argparse
import hashlib
import os
import re
import sys

SRC_DEFAULT = "/usr/share/doc/python3.11/html/_sources"
OUT_DEFAULT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "corpus_en.txt")

FILES = [
    "tutorial/" + n for n in (
        "appetite", "interpreter", "introduction", "controlflow", "datastructures", "modules",
        "inputoutput", "errors", "classes", "stdlib", "stdlib2", "venv", "whatnow", "interactive",
        "floatingpoint", "appendix")
] + [
    # The FAQ follows the tutorial so that ctx-2048 runs reach >= 20 000 scored tokens; the
    # first 160 KB (the tutorial) are unchanged, so test slices keep their bytes.
    "faq/" + n for n in (
        "general", "programming", "design", "library", "extending", "windows", "gui", "installed")
]

# sha256 of the output for python3.11-doc 3.11.x as installed by scripts/install_deps.sh.
EXPECTED_SHA256 = "8443f2801b8f99d54f5e6750aec3fe40170c190521d4b240ae7765387937513e"

# Directives whose indented body is prose and is kept.
PROSE_DIRECTIVES = {"note", "tip", "seealso", "warning", "important", "attention", "caution",
                    "hint", "admonition"}

ADORNMENT = re.compile(r'^([=\-~^"\'`#*+:.<>_])\1{2,}\s*$')
DIRECTIVE = re.compile(r"^\.\.\s+([A-Za-z0-9_-]+)::\s*(.*)$")
LIST_MARK = re.compile(r"^(?:[*+-]|#\.|\d+\.|\(\d+\))\s+")


def indent_of(line):
    return len(line) - len(line.lstrip(" "))


def strip_inline(text):
    # Literal text (roles, ``literals``) is replaced by placeholders first so that emphasis
    # rules never touch code such as ``*args``; the placeholders are restored at the end.
    saved = []

    def keep(s):
        saved.append(s)
        return "\x00%d\x00" % (len(saved) - 1)

    def role(m):
        body = m.group(1)
        t = re.match(r"^(.*?)\s*<[^<>]*>$", body, re.S)
        if t and t.group(1):
            return keep(t.group(1))
        body = body.lstrip("!")
        if body.startswith("~"):
            body = body[1:].split(".")[-1]
        return keep(body)
    text = re.sub(r":[A-Za-z0-9_+-]+(?::[A-Za-z0-9_+-]+)?:`([^`]+)`", role, text)
    text = re.sub(r"``(.+?)``", lambda m: keep(m.group(1)), text)
    # hyperlinks `text <url>`_ / `text`_ / `text`__ and interpreted text
    text = re.sub(r"`([^`<]+?)\s*<[^`>]+>`_{1,2}", r"\1", text)
    text = re.sub(r"`([^`]+)`_{1,2}", r"\1", text)
    text = re.sub(r"`([^`]+)`", r"\1", text)
    text = re.sub(r"\s*\[(?:#[A-Za-z0-9_-]*|\d+|\*)\]_", "", text)
    text = re.sub(r"\*\*([^*]+)\*\*", r"\1", text)
    text = re.sub(r"(?<![\w*])\*([^*\s][^*]*?)\*(?![\w*])", r"\1", text)
    text = re.sub(r"\|([A-Za-z0-9_ -]+)\|", r"\1", text)
    text = text.replace("\\ ", "").replace("\\", "")
    text = re.sub(r"\x00(\d+)\x00", lambda m: saved[int(m.group(1))], text)
    return re.sub(r"\s+", " ", text).strip()


def extract(text):
    lines = text.replace("\t", "        ").split("\n")
    out = []
    i, n = 0, len(lines)
    literal_next = False      # previous paragraph ended with "::"
    skip_indent = None        # skipping an indented body deeper than this indent
    keep_indent = None        # inside a prose directive: body deeper than this indent is kept
    para = []

    def flush():
        nonlocal para, literal_next
        if not para:
            return
        first = para[0].lstrip()
        joined = " ".join(p.strip() for p in para)
        para = []
        if first.startswith(">>>") or first.startswith("+-") or re.match(r"^=+\s+=+", first):
            literal_next = False
            return
        lit = joined.endswith("::")
        if lit:   # rst: "text::" reads "text:", "text ::" and a lone "::" vanish
            spaced = joined[:-2] != joined[:-2].rstrip() or joined == "::"
            joined = joined[:-2].rstrip()
            if joined and not spaced:
                joined += ":"
        literal_next = lit
        joined = LIST_MARK.sub("", joined)
        s = strip_inline(joined)
        if s and re.search(r"[A-Za-z]", s):
            out.append(s)

    while i < n:
        ln = lines[i]
        st = ln.strip()
        ind = indent_of(ln)
        if st == "":
            flush()
            i += 1
            continue
        if skip_indent is not None:
            if ind > skip_indent:
                i += 1
                continue
            skip_indent = None
        if keep_indent is not None and ind <= keep_indent:
            flush()
            keep_indent = None
        base = keep_indent + 1 if keep_indent is not None else 0
        if literal_next and not para:
            literal_next = False
            if ind > (keep_indent if keep_indent is not None else -1) and ind >= base and ind > 0:
                skip_indent = ind - 1
                i += 1
                continue
        if ADORNMENT.match(ln):
            flush()
            i += 1
            continue
        m = DIRECTIVE.match(st)
        if m:
            flush()
            name = m.group(1).lower()
            if name in PROSE_DIRECTIVES:
                keep_indent = ind
                if m.group(2).strip() and name == "admonition":
                    out.append(strip_inline(m.group(2)))
            else:
                skip_indent = ind
            i += 1
            continue
        if st.startswith(".."):
            flush()            # comment or label (.. _x:), with any indented body
            skip_indent = ind
            i += 1
            continue
        if keep_indent is None and ind > 0 and not para:
            skip_indent = ind - 1   # a block quote / unmarked code block
            i += 1
            continue
        # a list item starts a new paragraph
        if para and LIST_MARK.match(st) and ind <= indent_of(para[0]):
            flush()
        para.append(ln)
        i += 1
    flush()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", default=SRC_DEFAULT)
    ap.add_argument("--out", default=OUT_DEFAULT)
    ap.add_argument("--no-check", action="store_true", help="skip the sha256 check")
    a = ap.parse_args()
    paras = []
    for name in FILES:
        path = os.path.join(a.src, name + ".rst.txt")
        try:
            with open(path, encoding="utf-8") as f:
                paras.extend(extract(f.read()))
        except OSError as e:
            sys.exit(f"extract_corpus: cannot read {path}: {e.strerror} "
                     "(install the Debian package python3.11-doc: scripts/install_deps.sh)")
    data = ("\n\n".join(paras) + "\n").encode("utf-8")
    sha = hashlib.sha256(data).hexdigest()
    if not a.no_check and sha != EXPECTED_SHA256:
        sys.exit(f"extract_corpus: sha256 mismatch: got {sha}, expected {EXPECTED_SHA256}\n"
                 f"  (different python3.11-doc version or changed extraction rules; "
                 f"nothing written)")
    out = os.path.normpath(a.out)
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    tmp = out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, out)
    print(f"extract_corpus: {out}: {len(paras)} paragraphs, {len(data)} bytes, sha256 {sha}")


if __name__ == "__main__":
    main()

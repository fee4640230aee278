#!/usr/bin/env python3
"""Prints the manual page authd.toml(5) (roff, with tbl tables) made from
docs/CONFIG.md, so the page and the reference never disagree:

    python3 dist/authd.toml.5.py > /usr/local/share/man/man5/authd.toml.5
    python3 dist/authd.toml.5.py | man -l -      # read it without installing

Handles the Markdown that docs/CONFIG.md uses: headings, paragraphs, `-` and
`1.` lists, fenced and indented code, pipe tables, `code`, **bold**, *italic*
and [links](target). Python 3 standard library only.
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "docs" / "CONFIG.md"


def version():
    """The workspace version from Cargo.toml."""
    text = (ROOT / "Cargo.toml").read_text()
    m = re.search(r'^version = "([^"]+)"', text, re.M)
    return m.group(1) if m else ""


def escape(text):
    """Roff-escapes plain text (backslashes; no line may start with . or ')."""
    return text.replace("\\", "\\e")


def links(text):
    """[label](target) to the label; a link to another file also names the
    file. Labels may hold brackets (`[[key]]`): each `](` is matched back to
    its opening bracket."""
    out = ""
    while "](" in text and ")" in text[text.index("](") :]:
        close = text.index("](")
        end = text.index(")", close)
        depth, start = 0, close
        while start >= 0:
            if text[start] == "]":
                depth += 1
            elif text[start] == "[":
                depth -= 1
                if depth == 0:
                    break
            start -= 1
        if start < 0:
            break
        label, target = text[start + 1 : close], text[close + 2 : end]
        name = target.split("#")[0].replace("../", "")
        if name and not name.startswith(("docs/", "examples/", "dist/", "http")):
            name = "docs/" + name
        if name and label.strip("`") == name.rsplit("/", 1)[-1]:
            label = name
        elif name and label.strip("`") != name:
            label += f" ({name})"
        out += text[:start] + label
        text = text[end + 1 :]
    return out + text


def inline(text):
    """Markdown inline markup to roff font changes."""
    text = links(text)
    out = []
    pos = 0
    # `code` spans first: nothing inside them is markup.
    for m in re.finditer(r"`([^`]+)`", text):
        out.append(spans(text[pos : m.start()]))
        code = escape(m.group(1)).replace("-", "\\-")
        # Long names (AUTHD_TCP__MAX_CONNECTIONS_PER_CLIENT) may break after
        # _ / , = : . (roff's \: is a break point that adds no hyphen).
        code = re.sub(r"([_/,=:.])", r"\1\\:", code)
        out.append("\\fB" + code + "\\fR")
        pos = m.end()
    out.append(spans(text[pos:]))
    return "".join(out)


def spans(text):
    """Bold and italic in text without code spans."""
    text = escape(text)
    text = re.sub(r"\*\*([^*]+)\*\*", r"\\fB\1\\fR", text)
    text = re.sub(r"(?<![*\w])\*([^*\s][^*]*)\*(?![*\w])", r"\\fI\1\\fR", text)
    return text


def line(text):
    """A roff text line: protects a leading . or '."""
    return "\\&" + text if text[:1] in (".", "'") else text


def table(rows):
    """A pipe table as tbl: the header row bold, every cell a text block (so
    long cells wrap), the last column as wide as the page allows."""
    cells = []
    for row in rows:
        # A pipe escaped in the Markdown (\|) is part of its cell.
        split = re.split(r"(?<!\\)\|", row.strip().strip("|"))
        cells.append([c.strip().replace("\\|", "|") for c in split])
    cells = [r for r in cells if not all(re.fullmatch(r":?-+:?", c) for c in r)]
    n = max(len(r) for r in cells)
    out = [".TS", "allbox tab(@);", " ".join(["lb"] * n),
           " ".join(["lx" if i == n - 1 else "l" for i in range(n)]) + " ."]
    for r in cells:
        r = r + [""] * (n - len(r))
        out.append("@".join("T{\n" + line(inline(c)) + "\nT}" for c in r))
    out.append(".TE")
    return out


def convert(md):
    """docs/CONFIG.md to the body of the page."""
    out = []
    lines = md.splitlines()
    i = 0
    para = []

    def flush():
        if para:
            out.append(".PP")
            out.extend(line(inline(p)) for p in para)
            para.clear()

    while i < len(lines):
        text = lines[i]
        stripped = text.strip()
        if text.startswith("# "):
            i += 1
            continue
        if text.startswith("## ") or text.startswith("### "):
            flush()
            title = inline(text.lstrip("#").strip())
            if text.startswith("## "):
                title = re.sub(r"\\(F[BR]|E)", lambda m: "\\" + m.group(1).lower(), title.upper())
            out.append((".SH " if text.startswith("## ") else ".SS ") + '"' + title.replace('"', "") + '"')
            i += 1
            continue
        if stripped.startswith("```"):
            flush()
            i += 1
            block = []
            while i < len(lines) and not lines[i].strip().startswith("```"):
                block.append(lines[i])
                i += 1
            i += 1
            out += [".PP", ".RS 4", ".nf"] + [line(escape(b)) for b in block] + [".fi", ".RE"]
            continue
        if text.startswith("    ") and not para and stripped:
            flush()
            block = []
            while i < len(lines) and (lines[i].startswith("    ") or not lines[i].strip()):
                block.append(lines[i][4:])
                i += 1
            while block and not block[-1].strip():
                block.pop()
            out += [".PP", ".RS 4", ".nf"] + [line(escape(b)) for b in block] + [".fi", ".RE"]
            continue
        if stripped.startswith("|"):
            flush()
            rows = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                rows.append(lines[i])
                i += 1
            out += table(rows)
            continue
        m = re.match(r"(\s*)(- |\d+\. )(.*)", text)
        if m:
            flush()
            mark = "\\(bu" if m.group(2) == "- " else m.group(2).strip()
            item = [m.group(3)]
            i += 1
            while i < len(lines) and lines[i].startswith("  ") and lines[i].strip() \
                    and not re.match(r"\s*(- |\d+\. )", lines[i]):
                item.append(lines[i].strip())
                i += 1
            out.append(f".IP {mark} 4")
            out.extend(line(inline(p)) for p in item)
            continue
        if not stripped:
            flush()
            i += 1
            continue
        para.append(stripped)
        i += 1
    flush()
    return out


def main():
    md = SOURCE.read_text()
    head = [
        "'\\\" t",
        f'.TH authd.toml 5 "" "authd {version()}" "authd manual"',
        ".nh",
        ".ad l",
        ".SH NAME",
        "authd.toml \\- configuration file of authd, the authoritative DNS server",
        ".SH SYNOPSIS",
        "\\fB/etc/authd/authd.toml\\fR (as installed by dist/install.sh);",
        "\\fBauthd \\-\\-config\\fR \\fIPATH\\fR",
        ".SH DESCRIPTION",
        "This page is docs/CONFIG.md of the authd source, the reference for every",
        "key of the file, the \\fBAUTHD_*\\fR environment variables, the command-line",
        "flags and the signals. A commented example is installed as",
        "/etc/authd/authd.toml.",
    ]
    tail = [
        ".SH FILES",
        ".TP",
        "/etc/authd/authd.toml",
        "The configuration the service (authd.service) starts with.",
        ".TP",
        "/var/lib/authd",
        "Zone DBs, owned by the user authd.",
        ".TP",
        "/run/authd/control.sock",
        "The control socket, when \\fB[control] socket\\fR names it.",
        ".SH SEE ALSO",
        "\\fBauthd\\fR(1), \\fBauthc\\fR(1), \\fBloadzone\\fR(1), \\fBzone\\fR(1),",
        "\\fBdbutil\\fR(1), \\fBsystemctl\\fR(1)",
    ]
    sys.stdout.write("\n".join(head + convert(md) + tail) + "\n")


if __name__ == "__main__":
    main()

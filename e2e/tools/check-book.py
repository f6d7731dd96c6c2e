#!/usr/bin/env python3
"""Checks the book `make docs` built: every internal link and anchor resolves, every page of
docs/ is in it, and the user part holds no lab notes.

    check-book.py BOOK_DIR DOCS_DIR

BOOK_DIR is mdBook's output (target/book), DOCS_DIR its source (docs/, with SUMMARY.md).

- Links: every href and src of every rendered page that is not an absolute URL must name a file
  inside BOOK_DIR, and its #fragment an id of that file. A link that leaves the book (a path
  into the source tree such as ../deploy/) is broken: the book is read apart from a checkout.
- Pages: every Markdown file of DOCS_DIR (not its subfolders) is rendered, so none is missing
  from SUMMARY.md.
- User pages (SUMMARY.md's entries before its "Contributor guide" part) name no commit hash and
  no issue number: they describe what the code does, and history belongs in git and the
  changelog.

Prints one line per finding and exits 1 if there is any; prints a summary and exits 0 if none.
"""
import html.parser
import os
import re
import sys
import urllib.parse

# mdBook's own pages: print.html repeats every page with rewritten anchors, 404.html and
# toc.html are navigation scaffolding.
SKIPPED = {"print.html", "404.html", "toc.html"}
CONTRIBUTOR_PART = "# Contributor guide"


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids = set()
        self.links = []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if value is None:
                continue
            if name == "id" or (tag == "a" and name == "name"):
                self.ids.add(value)
            if name in ("href", "src"):
                self.links.append(value)


def parse(path):
    page = Page()
    with open(path, encoding="utf-8") as f:
        page.feed(f.read())
    return page


def rendered_pages(book):
    for directory, _, files in os.walk(book):
        for name in files:
            if name.endswith(".html"):
                path = os.path.join(directory, name)
                if os.path.relpath(path, book) not in SKIPPED:
                    yield path


def check_links(book):
    findings, cache, count = [], {}, 0

    def ids_of(path):
        if path not in cache:
            cache[path] = parse(path).ids
        return cache[path]

    root = os.path.realpath(book)
    for path in sorted(rendered_pages(book)):
        page = parse(path)
        cache[path] = page.ids
        where = os.path.relpath(path, book)
        for link in page.links:
            parts = urllib.parse.urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith("//"):
                continue
            count += 1
            target = path
            if parts.path:
                target = os.path.realpath(
                    os.path.join(os.path.dirname(path), urllib.parse.unquote(parts.path)))
                if target != root and not target.startswith(root + os.sep):
                    findings.append(f"{where}: {link}: leaves the book (write a path into the "
                                    "source tree as code, not as a link)")
                    continue
                if os.path.isdir(target):
                    target = os.path.join(target, "index.html")
                if not os.path.isfile(target):
                    findings.append(f"{where}: {link}: no such file in the book")
                    continue
            fragment = urllib.parse.unquote(parts.fragment)
            if fragment and target.endswith(".html") and fragment not in ids_of(target):
                findings.append(f"{where}: {link}: no anchor #{fragment} in "
                                f"{os.path.relpath(target, book)}")
    return findings, count


def summary_entries(docs):
    """The pages SUMMARY.md lists, each with whether it comes before the contributor part."""
    entries, user = [], True
    with open(os.path.join(docs, "SUMMARY.md"), encoding="utf-8") as f:
        for line in f:
            if line.strip() == CONTRIBUTOR_PART:
                user = False
            for target in re.findall(r"\]\(([^)#]+\.md)\)", line):
                entries.append((target, user))
    return entries


def check_pages(book, docs):
    findings = []
    for name in sorted(os.listdir(docs)):
        if name.endswith(".md") and name != "SUMMARY.md":
            if not os.path.isfile(os.path.join(book, name[:-3] + ".html")):
                findings.append(f"{name}: not in the book (list it in SUMMARY.md)")
    return findings


# A commit: 7 to 40 hex digits with at least one digit and one letter, not part of a sha256
# digest or a longer word. An issue: "issue 12", "issues 3 and 4", "#12" (not a link's anchor
# such as "(#3-a-first-pool)").
COMMIT = re.compile(r"(?<![\w:/.-])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![\w.-])")
ISSUE = re.compile(r"\bissues? #?\d+|(?<![\w&/(])#\d+\b(?!-)", re.IGNORECASE)


def check_user_pages(docs):
    findings = []
    for target, user in summary_entries(docs):
        if not user:
            continue
        with open(os.path.join(docs, target), encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                for pattern, what in ((COMMIT, "a commit hash"), (ISSUE, "an issue number")):
                    for match in pattern.finditer(line):
                        findings.append(f"{target}:{number}: {match.group(0)!r} looks like "
                                        f"{what}; user pages tell no history")
    return findings


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    book, docs = sys.argv[1], sys.argv[2]
    if not os.path.isfile(os.path.join(book, "index.html")):
        sys.exit(f"check-book.py: {book} holds no built book (run `make docs`)")
    links, count = check_links(book)
    findings = links + check_pages(book, docs) + check_user_pages(docs)
    for finding in findings:
        print(finding)
    if findings:
        print(f"check-book.py: {len(findings)} problems in the book", file=sys.stderr)
        sys.exit(1)
    print(f"check-book.py: {count} internal links and anchors resolve; every page is in the "
          f"book; user pages name no commit or issue")


if __name__ == "__main__":
    main()

//! Every Markdown table of README.md and docs/ renders: a header, a separator row, and rows with
//! as many cells as the header, with no blank line splitting the table.

use std::path::{Path, PathBuf};

fn markdown_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            files.push(path);
        }
    }
    files
}

/// The cell separators of a table row: `|` outside code spans and not escaped.
fn columns(row: &str) -> usize {
    let mut in_code = false;
    let mut escaped = false;
    let mut count = 0;
    for c in row.chars() {
        match c {
            '`' if !escaped => in_code = !in_code,
            '|' if !in_code && !escaped => count += 1,
            _ => {}
        }
        escaped = c == '\\' && !escaped;
    }
    count
}

fn is_separator(row: &str) -> bool {
    row.starts_with('|') && row.chars().all(|c| matches!(c, '|' | '-' | ':' | ' '))
}

/// What is wrong with the tables of `text`, one message per problem.
fn problems(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    let mut in_fence = false;
    let mut i = 0;
    while i < lines.len() {
        if lines[i].starts_with("```") {
            in_fence = !in_fence;
        }
        if in_fence || !lines[i].starts_with('|') {
            i += 1;
            continue;
        }
        let start = i;
        while i < lines.len() && lines[i].starts_with('|') {
            i += 1;
        }
        let table = &lines[start..i];
        if table.len() < 2 || !is_separator(table[1]) {
            found.push(format!(
                "line {}: a table row without a header and separator (a blank line inside a table?)",
                start + 1
            ));
            continue;
        }
        let header = columns(table[0]);
        for (offset, row) in table.iter().enumerate().skip(1) {
            if columns(row) != header {
                found.push(format!(
                    "line {}: {} cells where the header has {}",
                    start + offset + 1,
                    columns(row),
                    header
                ));
            }
        }
    }
    found
}

#[test]
fn every_table_in_the_docs_renders() {
    let mut all = Vec::new();
    for file in markdown_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        all.extend(problems(&text).into_iter().map(|p| format!("{}: {p}", file.display())));
    }
    assert!(all.is_empty(), "{}", all.join("\n"));
}

#[test]
fn a_table_split_by_a_blank_line_or_with_a_short_row_is_found() {
    assert!(problems("| a | b |\n|---|---|\n| 1 | 2 |\n").is_empty());
    assert!(problems("| a | b |\n|---|---|\n| `x|y` | 2 |\n").is_empty());
    assert_eq!(problems("| a | b |\n|---|---|\n| 1 | 2 |\n\n| 3 | 4 |\n").len(), 1);
    assert_eq!(problems("| a | b |\n|---|---|\n| 1 |\n").len(), 1);
}

//! The shell blocks of a Markdown page, and how a console block's output is compared.
//!
//! A fenced block's language says whether it runs:
//! - `sh`: runs as one `bash -euo pipefail` script;
//! - `console`: each line starting with `$ ` is a command (a line ending in `\` continues onto
//!   the next), and the lines after it, up to the next `$ ` or the end of the block, are its
//!   expected output (stdout and stderr together);
//! - `sh,norun` and `console,norun`: shown, not run;
//! - any other language (`yaml`, `text`, `promql`, ...): not a shell block, not run;
//! - no language, `bash`, `shell`, `zsh` or `shell-session`, or `sh`/`console` with another
//!   modifier than `norun`: an error, so that no command escapes the rule.
//!
//! A fence may be indented (a block in a list item); its lines lose that indentation.
//!
//! Expected output matches actual output line by line, after trailing spaces are trimmed from
//! both and trailing empty lines dropped. A line that is exactly `...` matches any number of
//! lines (none included).

/// How a shell block runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A script (```` ```sh ````).
    Script,
    /// Commands with their output (```` ```console ````).
    Console,
}

/// A shell block of a page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    pub kind: Kind,
    /// Whether the block runs (no `,norun`).
    pub runs: bool,
    /// The 1-based line of the page where the block's first line is.
    pub line: usize,
    /// The block's lines, without the fences.
    pub lines: Vec<String>,
}

/// A command of a console block and the output the page shows for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// The 1-based line of the page where the command starts.
    pub line: usize,
    /// The command, continuation lines joined with newlines (bash reads `\`+newline as a space).
    pub command: String,
    pub expected: Vec<String>,
}

/// Languages that name a shell but say nothing about running.
const UNLABELLED: [&str; 5] = ["", "bash", "shell", "zsh", "shell-session"];

/// The shell blocks of `page`, in page order; other blocks are skipped. Errors name the line of
/// a shell block without a known label, or of a fence never closed.
pub fn shell_blocks(page: &str) -> Result<Vec<Block>, String> {
    let mut blocks = Vec::new();
    let mut lines = page.lines().enumerate();
    while let Some((index, line)) = lines.next() {
        let trimmed = line.trim_start();
        let Some(info) = trimmed.strip_prefix("```") else { continue };
        let indent = line.len() - trimmed.len();
        let info = info.trim();
        let mut body = Vec::new();
        let mut closed = false;
        for (_, inner) in lines.by_ref() {
            if inner.trim() == "```" {
                closed = true;
                break;
            }
            let strip = inner.len() - inner.trim_start().len();
            body.push(inner[strip.min(indent)..].to_owned());
        }
        if !closed {
            return Err(format!("line {}: the block is never closed", index + 1));
        }
        let (language, modifier) = match info.split_once(',') {
            Some((language, modifier)) => (language.trim(), Some(modifier.trim())),
            None => (info, None),
        };
        let kind = match language {
            "sh" => Kind::Script,
            "console" => Kind::Console,
            other if UNLABELLED.contains(&other) => {
                return Err(format!(
                    "line {}: a shell block needs a label: sh, console, sh,norun or console,norun (found {:?})",
                    index + 1,
                    info
                ));
            }
            _ => continue,
        };
        let runs = match modifier {
            None => true,
            Some("norun") => false,
            Some(other) => return Err(format!("line {}: unknown modifier {other:?} (only norun)", index + 1)),
        };
        blocks.push(Block { kind, runs, line: index + 2, lines: body });
    }
    Ok(blocks)
}

/// The commands of a console block and their expected output.
pub fn steps(block: &Block) -> Result<Vec<Step>, String> {
    let mut steps: Vec<Step> = Vec::new();
    let mut lines = block.lines.iter().enumerate();
    while let Some((offset, line)) = lines.next() {
        let line_number = block.line + offset;
        if let Some(command) = line.strip_prefix("$ ") {
            let mut command = command.to_owned();
            while command.ends_with('\\') {
                let Some((_, next)) = lines.next() else {
                    return Err(format!("line {line_number}: the command continues past the block's end"));
                };
                command.push('\n');
                command.push_str(next);
            }
            steps.push(Step { line: line_number, command, expected: Vec::new() });
        } else {
            match steps.last_mut() {
                Some(step) => step.expected.push(line.clone()),
                None => return Err(format!("line {line_number}: output before the first `$ ` command")),
            }
        }
    }
    Ok(steps)
}

/// The lines of `text`, trailing spaces trimmed and trailing empty lines dropped.
fn normalised<S: AsRef<str>>(lines: impl IntoIterator<Item = S>) -> Vec<String> {
    let mut lines: Vec<String> = lines.into_iter().map(|l| l.as_ref().trim_end().to_owned()).collect();
    while lines.last().is_some_and(String::is_empty) {
        lines.pop();
    }
    lines
}

/// Whether `actual` is what `expected` shows (see the module's rules).
pub fn matches(expected: &[String], actual: &str) -> bool {
    fn walk(expected: &[String], actual: &[String]) -> bool {
        match expected.split_first() {
            None => actual.is_empty(),
            Some((first, rest)) if first == "..." => (0..=actual.len()).any(|skip| walk(rest, &actual[skip..])),
            Some((first, rest)) => actual.first() == Some(first) && walk(rest, &actual[1..]),
        }
    }
    walk(&normalised(expected), &normalised(actual.lines()))
}

/// The expected and actual lines side by side, for a failure message.
pub fn diff(expected: &[String], actual: &str) -> String {
    let mut out = String::from("--- expected (the page)\n");
    for line in normalised(expected) {
        out.push_str(&format!("  {line}\n"));
    }
    out.push_str("+++ actual\n");
    for line in normalised(actual.lines()) {
        out.push_str(&format!("  {line}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(str::to_owned).collect()
    }

    #[test]
    fn blocks_carry_their_kind_their_line_and_whether_they_run() {
        let page = "# Page\n\n```sh\nmake demo\n```\n\n```yaml\na: 1\n```\n\n```console,norun\n$ docker load\n```\n";
        let blocks = shell_blocks(page).unwrap();
        assert_eq!(
            blocks,
            vec![
                Block { kind: Kind::Script, runs: true, line: 4, lines: lines("make demo") },
                Block { kind: Kind::Console, runs: false, line: 12, lines: lines("$ docker load") },
            ]
        );
    }

    #[test]
    fn a_shell_block_without_a_label_is_an_error() {
        for fence in ["```", "```bash", "```shell", "```sh,later"] {
            let page = format!("text\n\n{fence}\nkubectl get pods\n```\n");
            let error = shell_blocks(&page).unwrap_err();
            assert!(error.starts_with("line 3:"), "{fence}: {error}");
        }
    }

    #[test]
    fn an_unclosed_block_is_an_error() {
        assert!(shell_blocks("```sh\nls\n").unwrap_err().contains("never closed"));
    }

    #[test]
    fn an_indented_block_loses_its_indentation() {
        let page = "1. Run:\n\n   ```sh\n   ferro-ipam preflight\n     --help\n   ```\n";
        let blocks = shell_blocks(page).unwrap();
        assert_eq!(blocks[0].lines, lines("ferro-ipam preflight\n  --help"));
    }

    #[test]
    fn console_steps_split_at_dollar_and_continue_after_a_backslash() {
        let block = Block {
            kind: Kind::Console,
            runs: true,
            line: 10,
            lines: lines("$ kubectl get pools \\\n    -n demo\nNAME\nnodes\n$ true\n"),
        };
        let steps = steps(&block).unwrap();
        assert_eq!(
            steps,
            vec![
                Step { line: 10, command: "kubectl get pools \\\n    -n demo".into(), expected: lines("NAME\nnodes") },
                Step { line: 14, command: "true".into(), expected: vec![] },
            ]
        );
    }

    #[test]
    fn output_before_the_first_command_is_an_error() {
        let block = Block { kind: Kind::Console, runs: true, line: 5, lines: lines("NAME\n$ true") };
        assert!(steps(&block).unwrap_err().starts_with("line 5:"));
    }

    #[test]
    fn output_matches_line_by_line_with_trailing_spaces_trimmed() {
        assert!(matches(&lines("NAME   READY\nnodes  True"), "NAME   READY   \nnodes  True\n\n"));
        assert!(!matches(&lines("NAME   READY\nnodes  True"), "NAME   READY\nnodes  False\n"));
        assert!(!matches(&lines("a"), "a\nb\n"));
        assert!(!matches(&lines("a\nb"), "a\n"));
    }

    #[test]
    fn an_ellipsis_line_matches_any_number_of_lines() {
        let expected = lines("first\n...\nlast");
        assert!(matches(&expected, "first\nlast\n"));
        assert!(matches(&expected, "first\nx\ny\nlast\n"));
        assert!(!matches(&expected, "first\nx\n"));
        assert!(matches(&lines("..."), ""));
        assert!(matches(&lines("a\n...\nb\n...\nb"), "a\nb\nb\n"));
        assert!(!matches(&lines("a\n...\nb\n...\nb"), "a\nb\n"));
    }

    #[test]
    fn the_diff_shows_both_sides() {
        let diff = diff(&lines("a"), "b\n");
        assert_eq!(diff, "--- expected (the page)\n  a\n+++ actual\n  b\n");
    }
}

//! The command line after `exec:`, split into a program and its arguments without a shell, so
//! `exec:python3 my_lock.py --journal '/tmp/my lock.log'` runs exactly those words.

use super::error::CommandError;

/// A command to start as a child: the program and its arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecCommand {
    words: Vec<String>,
}

impl ExecCommand {
    /// Splits `line` into words at whitespace: `'…'` is literal, `"…"` keeps whitespace and takes
    /// `\"` and `\\`, a backslash elsewhere escapes the next character. An empty command or an
    /// unfinished quote is an error.
    pub fn parse(line: &str) -> Result<ExecCommand, CommandError> {
        let mut words = Vec::new();
        let mut word: Option<String> = None;
        let mut chars = line.chars();
        while let Some(c) = chars.next() {
            match c {
                c if c.is_whitespace() => words.extend(word.take()),
                '\'' => {
                    let quoted = word.get_or_insert_with(String::new);
                    loop {
                        match chars.next() {
                            Some('\'') => break,
                            Some(c) => quoted.push(c),
                            None => return Err(unfinished('\'', line)),
                        }
                    }
                }
                '"' => {
                    let quoted = word.get_or_insert_with(String::new);
                    loop {
                        match chars.next() {
                            Some('"') => break,
                            Some('\\') => match chars.next() {
                                Some(c @ ('"' | '\\')) => quoted.push(c),
                                Some(c) => {
                                    quoted.push('\\');
                                    quoted.push(c);
                                }
                                None => return Err(unfinished('"', line)),
                            },
                            Some(c) => quoted.push(c),
                            None => return Err(unfinished('"', line)),
                        }
                    }
                }
                '\\' => match chars.next() {
                    Some(c) => word.get_or_insert_with(String::new).push(c),
                    None => {
                        return Err(CommandError::LoneBackslash {
                            line: line.to_string(),
                        });
                    }
                },
                c => word.get_or_insert_with(String::new).push(c),
            }
        }
        words.extend(word);
        if words.is_empty() {
            return Err(CommandError::Empty);
        }
        Ok(ExecCommand { words })
    }

    /// The program to run (looked up in `PATH`).
    pub fn program(&self) -> &str {
        &self.words[0]
    }

    /// Its arguments.
    pub fn args(&self) -> &[String] {
        &self.words[1..]
    }

    /// The words joined by spaces, for messages.
    pub fn shown(&self) -> String {
        self.words.join(" ")
    }
}

fn unfinished(quote: char, line: &str) -> CommandError {
    CommandError::UnfinishedQuote {
        line: line.to_string(),
        quote,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        let command = ExecCommand::parse(line).unwrap();
        std::iter::once(command.program().to_string())
            .chain(command.args().iter().cloned())
            .collect()
    }

    #[test]
    fn words_split_at_whitespace_and_quotes_keep_them() {
        assert_eq!(
            words("  python3   my_lock.py\t-v "),
            ["python3", "my_lock.py", "-v"]
        );
        assert_eq!(
            words(r#"sh -c 'echo "$X" a\b' x"y z"\ w"#),
            ["sh", "-c", r#"echo "$X" a\b"#, "xy z w"]
        );
        assert_eq!(words(r#"say "a \"b\" \\ \n""#), ["say", r#"a "b" \ \n"#]);
        assert_eq!(words("run ''"), ["run", ""]);
        assert_eq!(
            ExecCommand::parse("python3  x.py"),
            ExecCommand::parse("python3 x.py")
        );
    }

    #[test]
    fn empty_commands_and_unfinished_quotes_are_refused() {
        for empty in ["", "   "] {
            let error = ExecCommand::parse(empty).unwrap_err();
            assert_eq!(error, CommandError::Empty);
            assert!(error.to_string().contains("needs a command"), "{error}");
        }
        assert!(
            ExecCommand::parse("sh -c 'x")
                .unwrap_err()
                .to_string()
                .contains("unfinished '")
        );
        assert!(
            ExecCommand::parse("a \"b")
                .unwrap_err()
                .to_string()
                .contains("unfinished \"")
        );
        assert!(
            ExecCommand::parse("a \\")
                .unwrap_err()
                .to_string()
                .contains("lone backslash")
        );
    }
}

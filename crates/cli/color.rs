//! `--color` (`stat`, `report`, `eval`): when to colour threshold states. A flag's type, so it
//! is the CLI's; the printers take a plain `bool`.

/// `--color`: when to colour threshold states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    /// Colour when the output goes to a terminal (the flag's help says which stream).
    Auto,
    /// Always colour.
    Always,
    /// Never colour.
    Never,
}

impl ColorChoice {
    /// Whether to write colour escapes to standard output (`eval`'s stream; `stat` and
    /// `report` decide for standard error or their `-o` file themselves).
    pub fn enabled(self) -> bool {
        match self {
            ColorChoice::Auto => std::io::IsTerminal::is_terminal(&std::io::stdout()),
            ColorChoice::Always => true,
            ColorChoice::Never => false,
        }
    }
}

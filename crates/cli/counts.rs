//! Reading the counts file of `tmetric eval --counts` and `describe --counts` from a path or
//! standard input; what it holds and how it is evaluated is `tmetric_offline::counts`.

use std::path::Path;

use anyhow::Context;
use tmetric_offline::counts::{CountsFile, parse};

/// Reads and parses a counts file (`-`: standard input); errors carry `path:line:column`.
pub fn read(path: &Path) -> anyhow::Result<CountsFile> {
    if path.as_os_str() == "-" {
        tmetric_print::out::stdin_hint(
            "a counts file (JSON, docs/counts-format.md)",
            "a file (`--counts counts.json`) or a pipe (`... | tmetric eval --model M --counts -`)",
        );
        let bytes = tmetric_runtime::input::read_stdin(tmetric_runtime::input::COUNTS)
            .context("cannot read the counts from standard input")?;
        let text = String::from_utf8(bytes).map_err(|_| {
            anyhow::anyhow!("standard input is not UTF-8 text: expected a counts file (JSON)")
        })?;
        return Ok(parse(&text, "<stdin>")?);
    }
    let text = tmetric_runtime::input::read_to_string(path, tmetric_runtime::input::COUNTS)
        .with_context(|| format!("cannot read counts file `{}`", path.display()))?;
    Ok(parse(&text, &path.display().to_string())?)
}

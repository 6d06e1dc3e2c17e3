//! perf's negated booleans (`tools/lib/subcmd/parse-options.c`): every boolean option takes
//! `--no-` before its name (`--no-summary`, `--no-all-cpus`, `--no-detailed`), and one whose
//! name starts with `no-` is undone by its name without it (`--inherit`, `--merge`,
//! `--csv-summary`, `--aggr`). perf reads options in order, so a negation undoes what came
//! before it: here it is removed from the command line together with the earlier spellings
//! of the option it undoes, before clap reads the line. Options clap defines in both forms
//! (`--big-num`/`--no-big-num`, `--scale`/`--no-scale`) are left to clap.

use std::ffi::OsString;

use clap::ArgAction;

/// `argv` (the program, the subcommand, then its arguments) with perf's negations of
/// `command`'s boolean options applied, up to the first argument that is not an option (the
/// counted command) or `--`.
pub fn apply(command: &clap::Command, argv: Vec<OsString>) -> Vec<OsString> {
    let is_bool = |arg: &clap::Arg| {
        matches!(arg.get_action(), ArgAction::SetTrue | ArgAction::Count) && !arg.is_positional()
    };
    let long = |name: &str| command.get_arguments().find(|a| a.get_long() == Some(name));
    let short = |c: char| command.get_arguments().find(|a| a.get_short() == Some(c));
    let takes_value = |arg: &clap::Arg| arg.get_num_args().is_some_and(|n| n.takes_values());
    let mut out: Vec<OsString> = argv.iter().take(2).cloned().collect();
    let mut i = 2;
    while i < argv.len() {
        let Some(word) = argv[i].to_str() else { break };
        if word == "--" || !word.starts_with('-') || word == "-" {
            break;
        }
        if let Some(body) = word.strip_prefix("--") {
            let name = body.split_once('=').map_or(body, |(n, _)| n);
            if let Some(arg) = long(name) {
                out.push(argv[i].clone());
                // `--opt VALUE`: the value is not an option, whatever it looks like.
                if !body.contains('=')
                    && takes_value(arg)
                    && !arg.is_require_equals_set()
                    && let Some(value) = argv.get(i + 1)
                {
                    out.push(value.clone());
                    i += 1;
                }
                i += 1;
                continue;
            }
            // `--no-X` undoes `--X`; `--X` undoes `--no-X`.
            let undone = name
                .strip_prefix("no-")
                .and_then(long)
                .or_else(|| long(&format!("no-{name}")))
                .filter(|arg| is_bool(arg) && !body.contains('='));
            if let Some(arg) = undone {
                let spellings: Vec<String> = arg
                    .get_long()
                    .map(|l| format!("--{l}"))
                    .into_iter()
                    .chain(arg.get_short().map(|s| format!("-{s}")))
                    .collect();
                let short = arg.get_short();
                // `-dd` is two of `-d`: a cluster of the undone letter alone goes too.
                let repeated = |w: &str| {
                    w.strip_prefix('-').is_some_and(|letters| {
                        !letters.is_empty() && letters.chars().all(|c| Some(c) == short)
                    })
                };
                out.retain(|w| {
                    !w.to_str().is_some_and(|w| spellings.iter().any(|s| s == w) || repeated(w))
                });
                i += 1;
                continue;
            }
            out.push(argv[i].clone());
            i += 1;
            continue;
        }
        // A cluster of short options: the first that takes a value ends it, with the rest of
        // the word or the next argument as its value.
        out.push(argv[i].clone());
        let letters: Vec<char> = word[1..].chars().collect();
        for (k, &c) in letters.iter().enumerate() {
            match short(c) {
                Some(arg) if takes_value(arg) => {
                    if k + 1 == letters.len()
                        && let Some(value) = argv.get(i + 1)
                    {
                        out.push(value.clone());
                        i += 1;
                    }
                    break;
                }
                Some(_) => {}
                None => break,
            }
        }
        i += 1;
    }
    out.extend(argv[i.min(argv.len())..].iter().cloned());
    out
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

    use clap::{Arg, ArgAction, Command};

    use super::apply;

    fn command() -> Command {
        let mut command = Command::new("stat")
            .arg(Arg::new("all").short('a').long("all-cpus").action(ArgAction::SetTrue))
            .arg(Arg::new("detailed").short('d').long("detailed").action(ArgAction::Count))
            .arg(Arg::new("inherit").short('i').long("no-inherit").action(ArgAction::SetTrue))
            .arg(Arg::new("event").short('e').long("event"))
            .arg(Arg::new("command").num_args(0..).trailing_var_arg(true));
        command.build();
        command
    }

    fn negated(args: &[&str]) -> Vec<String> {
        let argv: Vec<OsString> =
            ["tmetric", "stat"].iter().chain(args).map(OsString::from).collect();
        let out = apply(&command(), argv);
        out.into_iter().skip(2).map(|w| w.into_string().unwrap()).collect()
    }

    #[test]
    fn a_negation_removes_the_earlier_spellings_of_what_it_undoes() {
        assert_eq!(negated(&["-a", "-e", "cs", "--no-all-cpus", "true"]), ["-e", "cs", "true"]);
        assert_eq!(negated(&["--no-all-cpus", "-a", "true"]), ["-a", "true"]);
        // `-dd` is two of `-d`.
        assert_eq!(negated(&["-d", "-dd", "--no-detailed", "true"]), ["true"]);
        // A name that starts with `no-` is undone by the name without it.
        assert_eq!(negated(&["-i", "--inherit", "true"]), ["true"]);
        // A value is not an option, and the counted command's words are its own.
        assert_eq!(
            negated(&["-e", "--no-all-cpus", "--", "x", "--no-all-cpus"]),
            ["-e", "--no-all-cpus", "--", "x", "--no-all-cpus"]
        );
    }
}

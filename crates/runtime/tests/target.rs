//! `target`: `-C` lists against the online CPUs, each problem told apart and worded in full.

use tmetric_runtime::run::Watched;
use tmetric_runtime::target::{CpuListProblem, cpu_list, watched};

#[test]
fn cpu_lists_name_online_cpus_in_order() {
    assert_eq!(cpu_list(" 3,0-1 ", &[0, 1, 2, 3]).unwrap(), vec![0, 1, 3]);
}

#[test]
fn each_problem_is_told_apart() {
    let online = [0, 1];
    let problem = |list: &str| cpu_list(list, &online).unwrap_err().problem;
    assert_eq!(problem(""), CpuListProblem::Empty { online: "0-1".into() });
    assert_eq!(problem("0,,1"), CpuListProblem::EmptyItem);
    assert_eq!(problem("0,x"), CpuListProblem::NotCpu { part: "x".into() });
    assert_eq!(problem("1-0"), CpuListProblem::Backwards { part: "1-0".into(), lo: 1, hi: 0 });
    assert_eq!(
        problem("99999999999"),
        CpuListProblem::TooLarge { cpu: "99999999999".into(), online: "0-1".into() }
    );
    // A huge range is said as ranges, never CPU by CPU.
    let err = cpu_list("0-99999999", &online).unwrap_err();
    assert_eq!(err.to_string(), "-C `0-99999999`: CPUs 2-99999999 are not online (online: 0-1)");
    let err = cpu_list("1,5", &online).unwrap_err();
    assert_eq!(err.to_string(), "-C `1,5`: CPU 5 is not online (online: 0-1)");
}

#[test]
fn with_a_command_no_target_ends_the_run() {
    assert_eq!(watched(Some(7), &[], false), vec![Watched::Process(7)]);
    assert_eq!(watched(None, &[8, 9], false), vec![Watched::Thread(8), Watched::Thread(9)]);
    assert!(watched(Some(7), &[], true).is_empty());
}

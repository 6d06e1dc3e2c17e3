//! POWER9 and POWER10 hv_24x7 metrics with perf's runtime parameter (`?`): inferred from the
//! hypervisor's events, evaluated once per chip or core the log holds, named as perf names the
//! instances (`PowerBUS_Frequency_1`) and checked against what perf printed.

use crate::support::{ok, stderr, stdout};

use super::{assert_close, count, fixture, json, line_of, one, perf_printed, read, text_value};
use super::{rows_of, tmetric_stdin};

/// POWER9 (pmu-events/arch/powerpc/power9/nest_metrics.json): Memory_RD_BW_Chip = the chip's
/// four PM_MCS*_128B_RD_DISP_PORT* summed, ScaleUnit 1.6e-2 MB; PowerBUS_Frequency =
/// PM_PB_CYC, ScaleUnit 2.5e-7 GHz; CPM_CS_32MHZ_CYC = CPM_CS_32MHZ_CYC with domain=3 of the
/// core, ScaleUnit 1 MHz. So chip 0: (120,000 + 95,000 + 130,000 + 105,000) * 0.016 = 7200 MB
/// and 8,000,000 * 2.5e-7 = 2.0 GHz; chip 1: 300,000 * 0.016 = 4800 MB and 2.1 GHz; cores 0
/// and 1: 3200 and 3190 MHz.
fn power9_expected(log: &str) -> Vec<(String, f64)> {
    let ports = [
        "PM_MCS01_128B_RD_DISP_PORT01",
        "PM_MCS01_128B_RD_DISP_PORT23",
        "PM_MCS23_128B_RD_DISP_PORT01",
        "PM_MCS23_128B_RD_DISP_PORT23",
    ];
    let mut out = Vec::new();
    for chip in 0..2 {
        let reads: f64 =
            ports.iter().map(|p| count(log, &format!("hv_24x7/{p},chip={chip}/"))).sum();
        out.push((format!("Memory_RD_BW_Chip_{chip}"), reads * 1.6e-2));
    }
    for chip in 0..2 {
        let cycles = count(log, &format!("hv_24x7/PM_PB_CYC,chip={chip}/"));
        out.push((format!("PowerBUS_Frequency_{chip}"), cycles * 2.5e-7));
    }
    for core in 0..2 {
        let cycles = count(log, &format!("hv_24x7/CPM_CS_32MHZ_CYC,domain=3,core={core}/"));
        out.push((format!("CPM_CS_32MHZ_CYC_{core}"), cycles));
    }
    out
}

#[test]
fn power9_chip_and_core_metrics_are_inferred_and_agree_with_perf() {
    let log = read("perf/std_power9_hv_24x7_chips.txt");
    let expected = power9_expected(&log);
    assert_eq!(
        expected.iter().map(|(_, v)| format!("{v:.1}")).collect::<Vec<_>>(),
        ["7200.0", "4800.0", "2.0", "2.1", "3200.0", "3190.0"]
    );
    let path = fixture("perf/std_power9_hv_24x7_chips.txt");
    let output = ok(&["eval", "--from-perf", &path]);
    let text = stdout(&output);
    let header = text.lines().next().unwrap();
    // No model's JSON lists the hypervisor's events: POWER9's metrics name them.
    assert!(
        header.starts_with("# tmetric: powerpc/power9 + common metrics (inferred: 6 of 6 printed metrics recomputed to perf's value, 12 of 12 rows are their inputs, 6 of 6 event names known; next best powerpc/power10 (0 agree, 0 rows, 0 events))"),
        "{header}"
    );
    for (metric, value) in &expected {
        assert_eq!(text_value(&text, metric), format!("{value:.1}"), "{metric}");
        assert_eq!(perf_printed(&log, metric), format!("{value:.1}"), "{metric}");
    }
    assert!(stderr(&output).contains("perf printed 6 of these values"), "{}", stderr(&output));
    assert!(stderr(&output).contains("all agree"), "{}", stderr(&output));

    let output = ok(&["eval", "--from-perf", &path, "--model", "powerpc/power9", "--json"]);
    let (header, rows) = json(&output);
    assert_eq!(header["model"], "powerpc/power9");
    let names: Vec<&str> = rows.iter().map(|r| r["metric"].as_str().unwrap()).collect();
    let want: Vec<&str> = expected.iter().map(|(m, _)| m.as_str()).collect();
    assert_eq!(names, want, "in the order perf printed them");
    for (metric, value) in &expected {
        let row = one(&rows, metric);
        assert_close(&row["value"], *value);
        assert_eq!(row["perf"]["agrees"], true, "{row}");
        assert_eq!(row["missing"], serde_json::json!([]), "{row}");
    }
}

/// `-M` selects a metric once per chip the log holds, and a group of them too; an instance
/// whose events the log lacks is listed last with them (Memory_WR_BW_Chip: none counted).
#[test]
fn m_selects_every_instance() {
    let path = fixture("perf/std_power9_hv_24x7_chips.txt");
    let args = ["eval", "--from-perf", &path, "-M", "Memory_BW,PowerBUS_Frequency", "--json"];
    let (_, rows) = json(&ok(&args));
    let names: Vec<&str> = rows.iter().map(|r| r["metric"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "Memory_RD_BW_Chip_0",
            "Memory_RD_BW_Chip_1",
            "PowerBUS_Frequency_0",
            "PowerBUS_Frequency_1",
            "Memory_WR_BW_Chip_0",
            "Memory_WR_BW_Chip_1",
        ]
    );
    let write = one(&rows, "Memory_WR_BW_Chip_1");
    assert_eq!(write["value"], serde_json::Value::Null);
    assert_eq!(
        write["missing"],
        serde_json::json!([
            "hv_24x7@PM_MCS01_128B_WR_DISP_PORT01,chip=1@",
            "hv_24x7@PM_MCS01_128B_WR_DISP_PORT23,chip=1@",
            "hv_24x7@PM_MCS23_128B_WR_DISP_PORT01,chip=1@",
            "hv_24x7@PM_MCS23_128B_WR_DISP_PORT23,chip=1@",
        ])
    );
}

/// A chip whose rows are gone (cut from the log) is reported like any metric with missing
/// inputs: Memory_RD_BW_Chip_1 without its two PORT23 rows has no value and names them;
/// PowerBUS_Frequency_1 without its only row is listed last, no block having its input. Chip 0
/// is untouched.
#[test]
fn a_chip_whose_events_are_missing_is_said_to_miss_them() {
    let full = read("perf/std_power9_hv_24x7_chips.txt");
    let cut: String = full
        .lines()
        .filter(|l| !l.contains("_PORT23,chip=1/") && !l.contains("PM_PB_CYC,chip=1/"))
        .map(|l| format!("{l}\n"))
        .collect();
    let output = tmetric_stdin(&["eval", "--from-perf", "-", "--json"], &cut);
    assert!(output.status.success(), "{}", stderr(&output));
    let (header, rows) = json(&output);
    assert_eq!(header["model"], "powerpc/power9");
    let chip1 = one(&rows, "Memory_RD_BW_Chip_1");
    assert_eq!(chip1["value"], serde_json::Value::Null);
    assert_eq!(
        chip1["missing"],
        serde_json::json!([
            "hv_24x7@PM_MCS01_128B_RD_DISP_PORT23,chip=1@",
            "hv_24x7@PM_MCS23_128B_RD_DISP_PORT23,chip=1@",
        ])
    );
    // perf printed it; without all its inputs there is nothing to check.
    assert_eq!(chip1["perf"]["printed"], "4800.0");
    assert_eq!(chip1["perf"]["agrees"], serde_json::Value::Null);
    let bus1 = one(&rows, "PowerBUS_Frequency_1");
    assert_eq!(bus1["missing"], serde_json::json!(["hv_24x7@PM_PB_CYC,chip=1@"]));
    assert_eq!(bus1["group"], serde_json::json!([]));
    assert_close(&one(&rows, "PowerBUS_Frequency_0")["value"], 8_000_000.0 * 2.5e-7);
    assert_close(&one(&rows, "Memory_RD_BW_Chip_0")["value"], 450_000.0 * 1.6e-2);
    let text = stdout(&tmetric_stdin(&["eval", "--from-perf", "-"], &cut));
    let last = text.lines().last().unwrap();
    assert_eq!(
        last,
        "     nan GHz  PowerBUS_Frequency_1  missing: hv_24x7@PM_PB_CYC,chip=1@  (no block of the log has any of its inputs)"
    );
}

/// Without metric lines (`perf stat -e hv_24x7/PM_PB_CYC,chip=N/`) the hypervisor's event alone
/// points to POWER9, and each chip's PowerBUS_Frequency is computed.
#[test]
fn hv_24x7_events_alone_point_to_their_model() {
    let log: String = read("perf/std_power9_hv_24x7_chips.txt")
        .lines()
        .filter(|l| !l.contains("PM_MCS") && !l.contains("CPM_CS"))
        .map(|l| format!("{}\n", l.split(" # ").next().unwrap()))
        .collect();
    let output = tmetric_stdin(&["eval", "--from-perf", "-", "--json"], &log);
    assert!(output.status.success(), "{}", stderr(&output));
    let (header, rows) = json(&output);
    assert_eq!(header["model"], "powerpc/power9");
    assert!(
        header["model_source"].as_str().unwrap().starts_with("inferred: 1 of 1 event names known"),
        "{header}"
    );
    assert_close(&one(&rows, "PowerBUS_Frequency_0")["value"], 2.0);
    assert_close(&one(&rows, "PowerBUS_Frequency_1")["value"], 2.1);
    assert_eq!(one(&rows, "PowerBUS_Frequency_1")["perf"], serde_json::Value::Null);
}

/// POWER10 (pmu-events/arch/powerpc/power10/nest_metrics.json): TOTAL_GROUP_PUMPS_P01 =
/// PM_PB_GROUP_PUMP01 / PM_PAU_CYC, ScaleUnit 4 (no unit); PowerBUS_Frequency = PM_PAU_CYC,
/// ScaleUnit 2.56e-7 GHz. Chip 0: 390,625 / 7,812,500 * 4 = 0.2 and 2.0 GHz; chip 1: 615,235 /
/// 8,203,125 * 4 = 0.30000... and 2.1 GHz. Each reads the PM_PAU_CYC of the group perf printed
/// it in (the event is counted once per metric).
#[test]
fn power10_chip_metrics_are_inferred_and_agree_with_perf() {
    let log = read("perf/std_power10_hv_24x7_chips.txt");
    let cycles = |chip: u32| count(&log, &format!("hv_24x7/PM_PAU_CYC,chip={chip}/"));
    let pumps = |chip: u32| count(&log, &format!("hv_24x7/PM_PB_GROUP_PUMP01,chip={chip}/"));
    let expected = [
        ("TOTAL_GROUP_PUMPS_P01_0", pumps(0) / cycles(0) * 4.0, "0.2"),
        ("TOTAL_GROUP_PUMPS_P01_1", pumps(1) / cycles(1) * 4.0, "0.3"),
        ("PowerBUS_Frequency_0", cycles(0) * 2.56e-7, "2.0"),
        ("PowerBUS_Frequency_1", cycles(1) * 2.56e-7, "2.1"),
    ];
    let path = fixture("perf/std_power10_hv_24x7_chips.txt");
    let output = ok(&["eval", "--from-perf", &path]);
    let text = stdout(&output);
    assert!(
        text.starts_with("# tmetric: powerpc/power10 + common metrics (inferred: 4 of 4 printed metrics recomputed to perf's value, 6 of 6 rows are their inputs, 2 of 2 event names known; next best powerpc/power9 (0 agree, 0 rows, 0 events))"),
        "{text}"
    );
    for (metric, value, printed) in expected {
        assert_eq!(format!("{value:.1}"), printed, "{metric}");
        assert_eq!(perf_printed(&log, metric), printed, "{metric}");
        assert_eq!(text_value(&text, metric), printed, "{metric}");
    }
    assert!(text.contains("     0.2 TOTAL_GROUP_PUMPS_P01_0  (group of line"), "{text}");
    assert!(stderr(&output).contains("all agree"), "{}", stderr(&output));
    let (_, rows) = json(&ok(&["eval", "--from-perf", &path, "--json"]));
    for (metric, value, _) in expected {
        let row = one(&rows, metric);
        assert_close(&row["value"], value);
        assert_eq!(row["perf"]["agrees"], true, "{row}");
    }
    // PowerBUS_Frequency_0 reads the second PM_PAU_CYC,chip=0 row, in its own group.
    let second = line_of(&log, "hv_24x7/PM_PAU_CYC,chip=0/", 1);
    let bus0 = one(&rows, "PowerBUS_Frequency_0");
    assert_eq!(bus0["group"][0]["line"], second);
    assert_eq!(bus0["group"][0]["metric_group"], true);
    assert_eq!(rows_of(&rows, "PowerBUS_Frequency").len(), 0);
}

//! macOS: `pmset -g therm` (the CPU speed limit the OS applies under thermal pressure, as
//! ProcessInfo.thermalState reports it) and `pmset -g batt` (power source, low power mode).

use std::process::Command;

use super::{PowerState, Pressure, Readings};

fn pmset(args: &[&str]) -> Option<String> {
    let out = Command::new("/usr/bin/pmset").args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The CPU speed limit in `pmset -g therm`'s text, percent.
fn speed_limit(therm: &str) -> Option<u32> {
    therm
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("CPU_Speed_Limit")
                .map(|v| v.trim_start_matches([' ', '=', '\t']).trim().parse::<u32>().ok())
        })
        .flatten()
}

pub fn readings() -> Readings {
    Readings { speed_limit_percent: pmset(&["-g", "therm"]).as_deref().and_then(speed_limit), ..Readings::default() }
}

pub fn read() -> PowerState {
    let pressure = match pmset(&["-g", "therm"]) {
        Some(text) => match speed_limit(&text) {
            Some(l) if l >= 100 => Pressure::Nominal,
            Some(l) if l >= 80 => Pressure::Fair,
            Some(l) if l >= 50 => Pressure::Serious,
            Some(_) => Pressure::Critical,
            None => Pressure::Nominal,
        },
        None => Pressure::Unknown,
    };
    let batt = pmset(&["-g", "batt"]).unwrap_or_default();
    let on_battery = batt.contains("'Battery Power'");
    let power_saver = pmset(&["-g"]).is_some_and(|t| {
        t.lines().any(|l| {
            let mut parts = l.split_whitespace();
            parts.next() == Some("lowpowermode") && parts.next() == Some("1")
        })
    });
    PowerState { pressure, on_battery, power_saver }
}

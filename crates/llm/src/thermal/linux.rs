//! Linux: thermal zones (`/sys/class/thermal`), power supplies (`/sys/class/power_supply`)
//! and the power profile (`/sys/firmware/acpi/platform_profile`).

use std::fs;
use std::path::Path;

use super::{pressure_from_trips, PowerState, Pressure, Readings};

fn read_i64(path: &Path) -> Option<i64> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn read_text(path: &Path) -> Option<String> {
    Some(fs::read_to_string(path).ok()?.trim().to_string())
}

fn zone_pressure(zone: &Path) -> Option<Pressure> {
    let temp = read_i64(&zone.join("temp"))?;
    let (mut passive, mut critical) = (None, None);
    for i in 0..16 {
        let Some(kind) = read_text(&zone.join(format!("trip_point_{i}_type"))) else { break };
        let Some(at) = read_i64(&zone.join(format!("trip_point_{i}_temp"))) else { continue };
        if at <= 0 {
            continue;
        }
        match kind.as_str() {
            "passive" => passive = Some(passive.map_or(at, |p: i64| p.min(at))),
            "critical" | "hot" => critical = Some(critical.map_or(at, |c: i64| c.min(at))),
            _ => {}
        }
    }
    Some(pressure_from_trips(temp, passive, critical))
}

pub fn read() -> PowerState {
    let mut pressure = Pressure::Unknown;
    if let Ok(zones) = fs::read_dir("/sys/class/thermal") {
        for zone in zones.flatten() {
            if zone.file_name().to_string_lossy().starts_with("thermal_zone") {
                if let Some(p) = zone_pressure(&zone.path()) {
                    pressure = pressure.max(p);
                }
            }
        }
    }
    let mut on_battery = false;
    let mut mains_online = false;
    if let Ok(supplies) = fs::read_dir("/sys/class/power_supply") {
        for supply in supplies.flatten() {
            let path = supply.path();
            match read_text(&path.join("type")).as_deref() {
                Some("Battery") if read_text(&path.join("status")).as_deref() == Some("Discharging") => {
                    on_battery = true
                }
                Some("Mains") | Some("USB") if read_i64(&path.join("online")) == Some(1) => mains_online = true,
                _ => {}
            }
        }
    }
    let power_saver = matches!(
        read_text(Path::new("/sys/firmware/acpi/platform_profile")).as_deref(),
        Some("low-power") | Some("quiet")
    );
    PowerState { pressure, on_battery: on_battery && !mains_online, power_saver }
}

/// The cores' clocks from cpufreq where the kernel has it, else `/proc/cpuinfo`'s "cpu MHz";
/// the hottest thermal zone.
pub fn readings() -> Readings {
    let mut khz = Vec::new();
    if let Ok(cpus) = fs::read_dir("/sys/devices/system/cpu") {
        for cpu in cpus.flatten() {
            if let Some(k) = read_i64(&cpu.path().join("cpufreq/scaling_cur_freq")) {
                khz.push(k as f32);
            }
        }
    }
    let cpu_mhz = if khz.is_empty() {
        fs::read_to_string("/proc/cpuinfo").ok().as_deref().and_then(mean_cpuinfo_mhz)
    } else {
        Some(khz.iter().sum::<f32>() / khz.len() as f32 / 1000.0)
    };
    let mut hottest: Option<i64> = None;
    if let Ok(zones) = fs::read_dir("/sys/class/thermal") {
        for zone in zones.flatten() {
            if zone.file_name().to_string_lossy().starts_with("thermal_zone") {
                if let Some(t) = read_i64(&zone.path().join("temp")).filter(|t| *t > 0) {
                    hottest = Some(hottest.map_or(t, |h| h.max(t)));
                }
            }
        }
    }
    Readings { cpu_mhz, temperature_c: hottest.map(|t| t as f32 / 1000.0), speed_limit_percent: None }
}

/// The mean of `/proc/cpuinfo`'s "cpu MHz" lines (x86 has them; ARM does not).
fn mean_cpuinfo_mhz(cpuinfo: &str) -> Option<f32> {
    let clocks: Vec<f32> = cpuinfo
        .lines()
        .filter(|l| l.starts_with("cpu MHz"))
        .filter_map(|l| l.split(':').nth(1)?.trim().parse().ok())
        .collect();
    (!clocks.is_empty()).then(|| clocks.iter().sum::<f32>() / clocks.len() as f32)
}

#[cfg(test)]
mod tests {
    #[test]
    fn cpuinfo_clocks_are_averaged() {
        let text = "processor\t: 0\ncpu MHz\t\t: 2000.000\nprocessor\t: 1\ncpu MHz\t\t: 3000.500\n";
        assert_eq!(super::mean_cpuinfo_mhz(text), Some(2500.25));
        assert_eq!(super::mean_cpuinfo_mhz("processor\t: 0\nBogoMIPS\t: 50.00\n"), None);
    }
}

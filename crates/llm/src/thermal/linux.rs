//! Linux: thermal zones (`/sys/class/thermal`), power supplies (`/sys/class/power_supply`)
//! and the power profile (`/sys/firmware/acpi/platform_profile`).

use std::fs;
use std::path::Path;

use super::{pressure_from_trips, PowerState, Pressure};

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

//! The machine's thermal and power state, read from the OS, so speculation can back off when
//! the machine is hot or saving battery. Per-OS readers live in one file each.

use serde::Serialize;
use ts_rs::TS;

#[cfg(target_os = "linux")]
#[path = "linux.rs"]
mod os;
#[cfg(target_os = "macos")]
#[path = "macos.rs"]
mod os;
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
#[path = "other.rs"]
mod os;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum Pressure {
    /// Nothing to read (no sensors exposed).
    Unknown,
    Nominal,
    /// Warm: close to a passive (throttling) trip point.
    Fair,
    /// At or past a passive trip point: the OS is throttling.
    Serious,
    /// Near the critical trip point.
    Critical,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, TS)]
pub struct PowerState {
    pub pressure: Pressure,
    /// Running from a battery (not on mains).
    pub on_battery: bool,
    /// The OS's low-power / power-saver mode is on.
    pub power_saver: bool,
}

impl PowerState {
    pub const UNKNOWN: PowerState = PowerState { pressure: Pressure::Unknown, on_battery: false, power_saver: false };

    /// Reads the current state; never fails (missing sensors read as unknown).
    pub fn read() -> PowerState {
        os::read()
    }
}

/// What the OS reports of the CPU's clock and heat, for figures over a long run (`quire bench
/// sustained`): each is `None` where the OS does not say (a virtual machine has no thermal
/// zones; macOS gives no temperature without private interfaces).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Readings {
    /// The cores' mean clock, MHz.
    pub cpu_mhz: Option<f32>,
    /// The hottest thermal zone, °C.
    pub temperature_c: Option<f32>,
    /// The CPU speed limit the OS applies under thermal pressure, percent (macOS).
    pub speed_limit_percent: Option<u32>,
}

impl Readings {
    /// Reads them now; never fails.
    pub fn read() -> Readings {
        os::readings()
    }
}

/// How speculation adapts to the machine: the most tokens to draft from the model, and
/// whether the draft model may run at all (free sources — grammar and lookup — still draft
/// unless the machine is critical, since verifying them costs little).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Throttle {
    pub model_drafts: bool,
    pub free_drafts: bool,
    pub max_k_divisor: usize,
}

impl Throttle {
    pub fn for_state(state: PowerState) -> Throttle {
        match state.pressure {
            Pressure::Critical => Throttle { model_drafts: false, free_drafts: false, max_k_divisor: 1 },
            Pressure::Serious => Throttle { model_drafts: false, free_drafts: true, max_k_divisor: 2 },
            _ if state.power_saver => Throttle { model_drafts: false, free_drafts: true, max_k_divisor: 2 },
            Pressure::Fair => Throttle { model_drafts: true, free_drafts: true, max_k_divisor: 2 },
            _ if state.on_battery => Throttle { model_drafts: true, free_drafts: true, max_k_divisor: 2 },
            _ => Throttle { model_drafts: true, free_drafts: true, max_k_divisor: 1 },
        }
    }
}

/// Pressure from a temperature and a zone's trip points (all in millidegrees Celsius).
pub fn pressure_from_trips(temp: i64, passive: Option<i64>, critical: Option<i64>) -> Pressure {
    if let Some(c) = critical {
        if temp >= c - 5_000 {
            return Pressure::Critical;
        }
    }
    match passive {
        Some(p) if temp >= p => Pressure::Serious,
        Some(p) if temp >= p - 10_000 => Pressure::Fair,
        Some(_) => Pressure::Nominal,
        // No passive trip: judge against critical alone.
        None => match critical {
            Some(c) if temp >= c - 15_000 => Pressure::Serious,
            Some(c) if temp >= c - 25_000 => Pressure::Fair,
            Some(_) => Pressure::Nominal,
            None => Pressure::Unknown,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trip_points_grade_the_pressure() {
        assert_eq!(pressure_from_trips(50_000, Some(90_000), Some(105_000)), Pressure::Nominal);
        assert_eq!(pressure_from_trips(85_000, Some(90_000), Some(105_000)), Pressure::Fair);
        assert_eq!(pressure_from_trips(92_000, Some(90_000), Some(105_000)), Pressure::Serious);
        assert_eq!(pressure_from_trips(101_000, Some(90_000), Some(105_000)), Pressure::Critical);
        assert_eq!(pressure_from_trips(95_000, None, Some(105_000)), Pressure::Serious);
        assert_eq!(pressure_from_trips(40_000, None, None), Pressure::Unknown);
    }

    #[test]
    fn pressure_and_battery_saver_throttle_drafting() {
        let state = |pressure, on_battery, power_saver| PowerState { pressure, on_battery, power_saver };
        assert_eq!(Throttle::for_state(state(Pressure::Nominal, false, false)).max_k_divisor, 1);
        assert!(!Throttle::for_state(state(Pressure::Critical, false, false)).free_drafts);
        assert!(!Throttle::for_state(state(Pressure::Serious, false, false)).model_drafts);
        assert!(!Throttle::for_state(state(Pressure::Nominal, true, true)).model_drafts);
        let battery = Throttle::for_state(state(Pressure::Nominal, true, false));
        assert!(battery.model_drafts && battery.max_k_divisor == 2);
        // Reading the real machine never fails.
        let _ = PowerState::read();
        let readings = Readings::read();
        assert!(readings.cpu_mhz.is_none_or(|mhz| mhz > 0.0), "{readings:?}");
    }
}

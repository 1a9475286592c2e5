//! Systems without a reader yet (Windows): the state is unknown, speculation runs unthrottled.

use super::{PowerState, Readings};

pub fn read() -> PowerState {
    PowerState::UNKNOWN
}

pub fn readings() -> Readings {
    Readings::default()
}

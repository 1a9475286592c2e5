//! What a command answers the UI: the `T` of the `Reply<T>` its function returns, sync or async,
//! whatever its arguments. `answers::<T, …>(command)` compiles only when `command` answers `T`:
//! how the command list (`command_names.rs`) is held to the functions it names.

use std::future::Future;

/// Implemented by each command function; `Value` is what it answers on success.
pub trait Answers<Args, Kind> {
    type Value;
}

/// Markers that keep the impls for plain and async functions apart.
pub struct Plain;
pub struct Async;

macro_rules! answers_for_arities {
    ($($arg:ident),*) => {
        impl<F, T, $($arg),*> Answers<($($arg,)*), Plain> for F
        where
            F: Fn($($arg),*) -> Result<T, String>,
        {
            type Value = T;
        }

        impl<F, Fut, T, $($arg),*> Answers<($($arg,)*), Async> for F
        where
            F: Fn($($arg),*) -> Fut,
            Fut: Future<Output = Result<T, String>>,
        {
            type Value = T;
        }
    };
}

answers_for_arities!();
answers_for_arities!(A);
answers_for_arities!(A, B);
answers_for_arities!(A, B, C);
answers_for_arities!(A, B, C, D);
answers_for_arities!(A, B, C, D, E);

/// Compiles when `command` answers `T`; does nothing.
pub fn answers<T, Args, Kind, F: Answers<Args, Kind, Value = T>>(_command: F) {}

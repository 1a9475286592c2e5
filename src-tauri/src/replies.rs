//! What a command takes from the UI and answers it. `answers::<T, …>(command)` compiles only when
//! `command` answers `T` (the `T` of the `Reply<T>` it returns, sync or async, whatever its
//! arguments); `takes::<(A, B), …>(command)` only when its last arguments are an `A` and a `B`
//! (those before them are what Tauri hands it: `State`, `AppHandle`). How the command list
//! (`command_names.rs`) is held to the functions it names; build.rs holds the names.

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

/// Implemented by each command function whose last arguments are `Args`, after `Handed` (what
/// Tauri hands it).
pub trait Takes<Args, Handed> {}

macro_rules! takes_impl {
    ([$($handed:ident),*] [$($arg:ident),*]) => {
        impl<F, R, $($handed,)* $($arg),*> Takes<($($arg,)*), ($($handed,)*)> for F
        where
            F: Fn($($handed,)* $($arg),*) -> R,
        {
        }
    };
}

/// `Takes` for functions handed the first group's arguments, then taking each later group's.
macro_rules! takes_for_arities {
    ($handed:tt $($args:tt)*) => {
        $(takes_impl!($handed $args);)*
    };
}

takes_for_arities!([] [] [A] [A, B] [A, B, C]);
takes_for_arities!([H] [] [A] [A, B] [A, B, C]);
takes_for_arities!([H, I] [] [A] [A, B] [A, B, C]);

/// Compiles when the last arguments of `command` are `Args`; does nothing.
pub fn takes<Args, Handed, F: Takes<Args, Handed>>(_command: F) {}

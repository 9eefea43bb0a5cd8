//! The words of the fitted models' parameter files (`hyper_erlang`,
//! `trace_model`): `key=value`, numbers, `LO-HI` size ranges and a
//! hyper-Erlang's `n=.. p=.. lambda1=.. lambda2=..`. Errors name the field and
//! the text found; the caller adds the line.

use crate::hyper_erlang::HyperErlang;

/// `key=value` → `value`.
pub(crate) fn key_value<'a>(token: &'a str, key: &str) -> Result<&'a str, String> {
    token
        .strip_prefix(key)
        .and_then(|rest| rest.strip_prefix('='))
        .ok_or_else(|| format!("expected '{key}=<value>', found '{token}'"))
}

pub(crate) fn number<T: std::str::FromStr>(text: &str, what: &str) -> Result<T, String> {
    text.parse().map_err(|_| format!("{what} = '{text}' is not a valid number here"))
}

pub(crate) fn float(text: &str, what: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(x) if x.is_finite() => Ok(x),
        _ => Err(format!("{what} = '{text}' is not a finite number")),
    }
}

/// `LO-HI` with 1 <= LO <= HI.
pub(crate) fn size_range(text: &str) -> Result<(u32, u32), String> {
    let bad = || format!("expected a size range 'LO-HI' with 1 <= LO <= HI, found '{text}'");
    let (lo, hi) = text.split_once('-').ok_or_else(bad)?;
    let (lo, hi): (u32, u32) = (lo.parse().map_err(|_| bad())?, hi.parse().map_err(|_| bad())?);
    if lo == 0 || lo > hi {
        return Err(bad());
    }
    Ok((lo, hi))
}

/// `n=.. p=.. lambda1=.. lambda2=..` of the distribution named `label`, checked.
pub(crate) fn hyper_erlang(tokens: &[&str; 4], label: &str) -> Result<HyperErlang, String> {
    let [n, p, lambda1, lambda2] = *tokens;
    let he = HyperErlang {
        order: number(key_value(n, "n")?, &format!("{label} n"))?,
        p: float(key_value(p, "p")?, &format!("{label} p"))?,
        lambda1: float(key_value(lambda1, "lambda1")?, &format!("{label} lambda1"))?,
        lambda2: float(key_value(lambda2, "lambda2")?, &format!("{label} lambda2"))?,
    };
    he.validate().map_err(|e| format!("{label}: {e}"))?;
    Ok(he)
}

//! Dates in UTC, as `history` prints them and reads its time window (`-S`, `-E`), without a time zone database:
//! the controller's clock and the reader's may be in different zones, so both sides speak UTC.

/// The proleptic Gregorian calendar repeats every 400 years, which have this many days.
const DAYS_PER_400_YEARS: u64 = 146_097;
/// Days from 0000-03-01 to 1970-01-01: counting years from March puts the leap day last.
const EPOCH_FROM_MARCH_0000: u64 = 719_468;

/// The UTC date (year, month 1–12, day 1–31) of a day counted from 1970-01-01.
pub fn date_of_day(day: u64) -> (u64, u32, u32) {
    let days = day + EPOCH_FROM_MARCH_0000;
    let era = days / DAYS_PER_400_YEARS;
    let day_of_era = days % DAYS_PER_400_YEARS;
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day_of_month = (day_of_year - (153 * month_from_march + 2) / 5 + 1) as u32;
    let month = if month_from_march < 10 { month_from_march + 3 } else { month_from_march - 9 } as u32;
    let year = era * 400 + year_of_era + u64::from(month <= 2);
    (year, month, day_of_month)
}

/// A Unix time in milliseconds as UTC `YYYY-MM-DDTHH:MM:SS.mmmZ` (RFC 3339, as the daemon stamps its log lines).
pub fn utc_millis_text(unix_ms: u64) -> String {
    let seconds = unix_ms / 1000;
    let (year, month, day) = date_of_day(seconds / 86_400);
    let s = seconds % 86_400;
    let ms = unix_ms % 1000;
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{ms:03}Z", s / 3600, s / 60 % 60, s % 60)
}

/// The day, counted from 1970-01-01, of a UTC date; `None` for a date that does not exist or is before 1970.
pub fn day_of_date(year: u64, month: u32, day: u32) -> Option<u64> {
    let leap = year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400));
    let month_days = [31, if leap { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    if !(1..=12).contains(&month) || day == 0 || day > month_days[month as usize - 1] || year > 9999 {
        return None;
    }
    let year_from_march = if month <= 2 { year.checked_sub(1)? } else { year };
    let (era, year_of_era) = (year_from_march / 400, year_from_march % 400);
    let month_from_march = u64::from((month + 9) % 12);
    let day_of_year = (153 * month_from_march + 2) / 5 + u64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    (era * DAYS_PER_400_YEARS + day_of_era).checked_sub(EPOCH_FROM_MARCH_0000)
}

/// A time as sacct's `-S`/`-E` take it, in Unix milliseconds: `now`, `now-7days` (also `+`; units seconds,
/// minutes, hours, days, weeks, or their first letters; seconds when none), `YYYY-MM-DD`, `YYYY-MM-DDTHH:MM` or
/// `YYYY-MM-DDTHH:MM:SS` in UTC.
pub fn parse_when(text: &str, now_unix_ms: u64) -> Result<u64, String> {
    let bad = |why: &str| format!("'{text}': {why} (e.g. now-7days, 2026-11-01, 2026-11-01T08:30 in UTC)");
    let trimmed = text.trim();
    if let Some(offset) = trimmed.strip_prefix("now") {
        return relative(offset, now_unix_ms).ok_or_else(|| bad("not a time relative to now"));
    }
    let (date, time) = trimmed.split_once('T').unwrap_or((trimmed, "00:00:00"));
    let numbers = |part: &str, sep: char| -> Option<Vec<u64>> {
        part.split(sep).map(|n| n.parse::<u64>().ok().filter(|_| n.len() <= 4 && !n.is_empty())).collect()
    };
    let ymd = numbers(date, '-').filter(|v| v.len() == 3).ok_or_else(|| bad("not a date"))?;
    let day = day_of_date(ymd[0], ymd[1] as u32, ymd[2] as u32).ok_or_else(|| bad("no such date"))?;
    let hms = numbers(time, ':').filter(|v| (2..=3).contains(&v.len())).ok_or_else(|| bad("not a time of day"))?;
    let (hour, minute, second) = (hms[0], hms[1], hms.get(2).copied().unwrap_or(0));
    if hour > 23 || minute > 59 || second > 59 {
        return Err(bad("no such time of day"));
    }
    Ok(((day * 86_400) + hour * 3600 + minute * 60 + second) * 1000)
}

/// `""`, `-7days`, `+2h`: `now_unix_ms` moved by that much.
fn relative(offset: &str, now_unix_ms: u64) -> Option<u64> {
    if offset.is_empty() {
        return Some(now_unix_ms);
    }
    let sign = offset.chars().next()?;
    let rest = &offset[sign.len_utf8()..];
    let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
    let count: u64 = rest[..digits].parse().ok()?;
    let unit_s: u64 = match rest[digits..].to_ascii_lowercase().as_str() {
        "" | "s" | "sec" | "secs" | "second" | "seconds" => 1,
        "m" | "min" | "mins" | "minute" | "minutes" => 60,
        "h" | "hour" | "hours" => 3600,
        "d" | "day" | "days" => 86_400,
        "w" | "week" | "weeks" => 7 * 86_400,
        _ => return None,
    };
    let ms = count.checked_mul(unit_s)?.checked_mul(1000)?;
    match sign {
        '-' => Some(now_unix_ms.saturating_sub(ms)),
        '+' => now_unix_ms.checked_add(ms),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_stamp_is_utc_to_the_millisecond() {
        assert_eq!(utc_millis_text(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc_millis_text(1_764_318_600_123), "2025-11-28T08:30:00.123Z");
        assert_eq!(utc_millis_text(951_825_599_999), "2000-02-29T11:59:59.999Z");
    }

    #[test]
    fn dates_round_trip_over_four_centuries_and_known_days_are_right() {
        assert_eq!(date_of_day(0), (1970, 1, 1));
        assert_eq!(date_of_day(11_016), (2000, 2, 29));
        assert_eq!(date_of_day(20_418), (2025, 11, 26));
        for day in (0..DAYS_PER_400_YEARS + 800).step_by(7) {
            let (y, m, d) = date_of_day(day);
            assert_eq!(day_of_date(y, m, d), Some(day), "{y}-{m}-{d}");
        }
        assert_eq!(day_of_date(2023, 2, 29), None);
        assert_eq!(day_of_date(2100, 2, 29), None, "not a leap year");
        assert_eq!(day_of_date(2026, 13, 1), None);
        assert_eq!(day_of_date(1969, 12, 31), None, "before 1970");
    }

    #[test]
    fn times_are_read_as_sacct_takes_them() {
        let now = 1_764_115_200_000; // 2025-11-26T00:00:00
        assert_eq!(parse_when("now", now), Ok(now));
        assert_eq!(parse_when("now-7days", now), Ok(now - 7 * 86_400_000));
        assert_eq!(parse_when("now-90", now), Ok(now - 90_000), "seconds when no unit");
        assert_eq!(parse_when("now+2h", now), Ok(now + 7_200_000));
        assert_eq!(parse_when("2025-11-26", now), Ok(now));
        assert_eq!(parse_when("2025-11-26T08:30", now), Ok(now + 8 * 3_600_000 + 30 * 60_000));
        assert_eq!(parse_when("2025-11-26T08:30:15", now), Ok(now + 8 * 3_600_000 + 30 * 60_000 + 15_000));
        let bad_ones =
            ["yesterday", "now-7fortnights", "now*3", "2025-02-30", "2025-11-26T24:00", "2025-11", "", "now-"];
        for bad in bad_ones.into_iter().chain(["nowé", "now€1", "now-1é", "2025-11-2é"]) {
            let error = parse_when(bad, now).unwrap_err();
            assert!(error.contains(&format!("'{bad}'")), "{error}");
        }
    }
}

//! CF time coordinates: `units = "<unit> since <reference>"` and `calendar`, decoded to
//! Arrow timestamps.
//!
//! A value `x` of an axis whose attributes say `hours since 1900-01-01` is the date-time
//! `x` hours after the reference, counted in the axis' calendar:
//! - `standard` / `gregorian` (also when `calendar` is absent): Julian before 1582-10-15,
//!   Gregorian from then on (the ten days in between do not exist);
//! - `proleptic_gregorian`, `julian`: one rule for every year;
//! - `noleap` / `365_day`, `all_leap` / `366_day`: every year has 365 / 366 days;
//! - `360_day`: twelve 30-day months.
//!
//! Units: days, hours, minutes, seconds, milliseconds, microseconds, nanoseconds and their
//! CF abbreviations (`d`, `h`/`hr`, `min`, `s`/`sec`, `ms`/`msec`, `us`/`usec`, `ns`), in
//! any case; offsets may be integers or fractions (rounded to the nanosecond). The
//! reference is `Y-M-D`, optionally followed by `h:m:s[.fraction]` (after a space or `T`)
//! and a UTC offset (`Z`, `UTC`, `+05:30`, `-6`); years are astronomical (year 0 exists).
//!
//! The column is `Timestamp(ns)` holding each value's calendar fields (year, month, day,
//! time of day — as xarray's `.dt` accessors see them), when every date exists in the
//! proleptic Gregorian calendar. Otherwise (`360_day`, and `all_leap` or `julian` series
//! holding a Feb 29 that Gregorian lacks) it is `Utf8` ISO 8601 text (`2001-02-30T00:00:00`).
//! When a date lies outside the range of `Timestamp(ns)` (years 1677–2262), the column is
//! `Timestamp(µs)` (±290 000 years; control and paleo runs), and beyond that an error.

use arrow::array::{Array, ArrayRef, AsArray, StringArray, TimestampMicrosecondArray, TimestampNanosecondArray};
use arrow::datatypes::{DataType, Float64Type, Int64Type};
use std::collections::BTreeMap;
use std::sync::Arc;

const NS_PER_DAY: i128 = 86_400 * 1_000_000_000;

/// A CF calendar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Calendar {
    /// Julian before 1582-10-15, Gregorian after.
    Standard,
    ProlepticGregorian,
    Julian,
    /// 365 days every year.
    NoLeap,
    /// 366 days every year.
    AllLeap,
    /// Twelve months of 30 days.
    Day360,
}

impl Calendar {
    /// The calendar named by a `calendar` attribute (`None`: the default, standard).
    pub fn parse(name: Option<&str>) -> Result<Calendar, String> {
        let Some(name) = name else {
            return Ok(Calendar::Standard);
        };
        Ok(match name.trim().to_ascii_lowercase().as_str() {
            "standard" | "gregorian" => Calendar::Standard,
            "proleptic_gregorian" => Calendar::ProlepticGregorian,
            "julian" => Calendar::Julian,
            "noleap" | "365_day" => Calendar::NoLeap,
            "all_leap" | "366_day" => Calendar::AllLeap,
            "360_day" => Calendar::Day360,
            other => {
                return Err(format!(
                    "calendar {other:?} is not one of standard, gregorian, proleptic_gregorian, julian, noleap, 365_day, all_leap, 366_day, 360_day"
                ));
            }
        })
    }

    fn is_leap(self, year: i64) -> bool {
        let julian = year.rem_euclid(4) == 0;
        let gregorian = julian && (year.rem_euclid(100) != 0 || year.rem_euclid(400) == 0);
        match self {
            Calendar::ProlepticGregorian => gregorian,
            Calendar::Julian => julian,
            Calendar::Standard => {
                if year < 1582 {
                    julian
                } else {
                    gregorian
                }
            }
            Calendar::NoLeap | Calendar::Day360 => false,
            Calendar::AllLeap => true,
        }
    }

    /// Days in `month` (1–12) of `year`.
    pub fn month_days(self, year: i64, month: u32) -> u32 {
        if self == Calendar::Day360 {
            return 30;
        }
        match month {
            2 if self.is_leap(year) => 29,
            2 => 28,
            4 | 6 | 9 | 11 => 30,
            _ => 31,
        }
    }

    /// The day number of a date (consecutive days have consecutive numbers).
    pub fn day_number(self, year: i64, month: u32, day: u32) -> Result<i64, String> {
        if !(1..=12).contains(&month) || day < 1 || day > self.month_days(year, month) {
            return Err(format!(
                "{year:04}-{month:02}-{day:02} is not a date of the {self:?} calendar"
            ));
        }
        Ok(match self {
            Calendar::ProlepticGregorian => jdn_gregorian(year, month, day),
            Calendar::Julian => jdn_julian(year, month, day),
            Calendar::Standard => {
                if (year, month, day) >= (1582, 10, 15) {
                    jdn_gregorian(year, month, day)
                } else if (year, month, day) <= (1582, 10, 4) {
                    jdn_julian(year, month, day)
                } else {
                    return Err(format!(
                        "{year:04}-{month:02}-{day:02} does not exist in the standard calendar (1582-10-05 to 1582-10-14 were skipped)"
                    ));
                }
            }
            Calendar::NoLeap | Calendar::AllLeap | Calendar::Day360 => {
                let year_days = match self {
                    Calendar::NoLeap => 365,
                    Calendar::AllLeap => 366,
                    _ => 360,
                };
                let before: u32 = (1..month).map(|m| self.month_days(year, m)).sum();
                year * year_days + before as i64 + day as i64 - 1
            }
        })
    }

    /// The date of a day number.
    pub fn date(self, n: i64) -> (i64, u32, u32) {
        match self {
            Calendar::ProlepticGregorian => gregorian_of_jdn(n),
            Calendar::Julian => julian_of_jdn(n),
            Calendar::Standard if n >= GREGORIAN_START_JDN => gregorian_of_jdn(n),
            Calendar::Standard => julian_of_jdn(n),
            Calendar::NoLeap | Calendar::AllLeap | Calendar::Day360 => {
                let year_days = match self {
                    Calendar::NoLeap => 365,
                    Calendar::AllLeap => 366,
                    _ => 360,
                };
                let year = n.div_euclid(year_days);
                let mut left = n.rem_euclid(year_days) as u32;
                let mut month = 1;
                while left >= self.month_days(year, month) {
                    left -= self.month_days(year, month);
                    month += 1;
                }
                (year, month, left + 1)
            }
        }
    }
}

/// Julian day number of 1582-10-15 (Gregorian), the first day of the Gregorian calendar.
const GREGORIAN_START_JDN: i64 = 2_299_161;

fn jdn_parts(year: i64, month: u32) -> (i64, i64) {
    let a = (14 - month as i64) / 12;
    (year + 4800 - a, month as i64 + 12 * a - 3)
}

fn jdn_gregorian(year: i64, month: u32, day: u32) -> i64 {
    let (y, m) = jdn_parts(year, month);
    day as i64 + (153 * m + 2) / 5 + 365 * y + y.div_euclid(4) - y.div_euclid(100) + y.div_euclid(400) - 32045
}

fn jdn_julian(year: i64, month: u32, day: u32) -> i64 {
    let (y, m) = jdn_parts(year, month);
    day as i64 + (153 * m + 2) / 5 + 365 * y + y.div_euclid(4) - 32083
}

fn gregorian_of_jdn(n: i64) -> (i64, u32, u32) {
    let a = n + 32044;
    let b = (4 * a + 3).div_euclid(146_097);
    let c = a - (146_097 * b).div_euclid(4);
    finish_of_jdn(b * 100, c)
}

fn julian_of_jdn(n: i64) -> (i64, u32, u32) {
    finish_of_jdn(0, n + 32082)
}

fn finish_of_jdn(century: i64, c: i64) -> (i64, u32, u32) {
    let d = (4 * c + 3).div_euclid(1461);
    let e = c - (1461 * d).div_euclid(4);
    let m = (5 * e + 2).div_euclid(153);
    let day = e - (153 * m + 2).div_euclid(5) + 1;
    let month = m + 3 - 12 * m.div_euclid(10);
    let year = century + d - 4800 + m.div_euclid(10);
    (year, month as u32, day as u32)
}

/// A date and time of day in some calendar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CalendarDateTime {
    pub year: i64,
    pub month: u32,
    pub day: u32,
    /// Nanoseconds since midnight.
    pub nanos: i64,
}

impl CalendarDateTime {
    /// ISO 8601 text, `YYYY-MM-DDThh:mm:ss` plus the fraction when there is one.
    pub fn iso(&self) -> String {
        let secs = self.nanos / 1_000_000_000;
        let frac = self.nanos % 1_000_000_000;
        let mut s = format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
            self.year,
            self.month,
            self.day,
            secs / 3600,
            secs / 60 % 60,
            secs % 60
        );
        if frac % 1_000_000 == 0 && frac != 0 {
            s += &format!(".{:03}", frac / 1_000_000);
        } else if frac % 1000 == 0 && frac != 0 {
            s += &format!(".{:06}", frac / 1000);
        } else if frac != 0 {
            s += &format!(".{frac:09}");
        }
        s
    }

    /// Nanoseconds since 1970-01-01T00:00 for the same calendar fields read as a proleptic
    /// Gregorian date; `None` when that date does not exist or is out of `i64` range.
    pub fn gregorian_nanos(&self) -> Option<i64> {
        let days = Calendar::ProlepticGregorian
            .day_number(self.year, self.month, self.day)
            .ok()?
            - UNIX_EPOCH_JDN;
        i64::try_from(days as i128 * NS_PER_DAY + self.nanos as i128).ok()
    }

    /// [`CalendarDateTime::gregorian_nanos`] in microseconds; `None` also when the time of
    /// day is not a whole microsecond.
    pub fn gregorian_micros(&self) -> Option<i64> {
        if self.nanos % 1000 != 0 {
            return None;
        }
        let days = Calendar::ProlepticGregorian
            .day_number(self.year, self.month, self.day)
            .ok()?
            - UNIX_EPOCH_JDN;
        i64::try_from(days as i128 * (NS_PER_DAY / 1000) + (self.nanos / 1000) as i128).ok()
    }
}

/// Julian day number of 1970-01-01.
const UNIX_EPOCH_JDN: i64 = 2_440_588;

/// The `units` (and `calendar`) of a CF time coordinate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CfTime {
    pub calendar: Calendar,
    /// Nanoseconds in one unit.
    pub unit_ns: i64,
    /// The reference instant (UTC), in nanoseconds since day number 0 of the calendar.
    reference: i128,
}

impl CfTime {
    /// The time units of an attribute set: `None` when `units` is absent or has no
    /// `since`; an error naming the attribute when it has one but does not parse.
    pub fn from_attrs(attrs: &BTreeMap<String, String>) -> Result<Option<CfTime>, String> {
        let Some(units) = attrs.get("units") else {
            return Ok(None);
        };
        let Some((unit, reference)) = split_since(units) else {
            return Ok(None);
        };
        let calendar = Calendar::parse(attrs.get("calendar").map(String::as_str))
            .map_err(|e| format!("attribute calendar: {e}"))?;
        let unit_ns = unit_nanos(unit).ok_or_else(|| {
            format!("attribute units {units:?}: unknown time unit {unit:?} (days, hours, minutes, seconds, milliseconds, microseconds, nanoseconds)")
        })?;
        let (date, offset_minutes) = parse_reference(reference)
            .map_err(|e| format!("attribute units {units:?}: reference {reference:?} {e}"))?;
        let day = calendar
            .day_number(date.year, date.month, date.day)
            .map_err(|e| format!("attribute units {units:?}: {e}"))?;
        Ok(Some(CfTime {
            calendar,
            unit_ns,
            reference: day as i128 * NS_PER_DAY + date.nanos as i128 - offset_minutes as i128 * 60_000_000_000,
        }))
    }

    /// The date-time `ns` nanoseconds after the reference.
    pub fn after_nanos(&self, ns: i128) -> Option<CalendarDateTime> {
        let t = self.reference.checked_add(ns)?;
        let day = i64::try_from(t.div_euclid(NS_PER_DAY)).ok()?;
        if day.unsigned_abs() > 1 << 40 {
            return None;
        }
        let (year, month, d) = self.calendar.date(day);
        Some(CalendarDateTime {
            year,
            month,
            day: d,
            nanos: t.rem_euclid(NS_PER_DAY) as i64,
        })
    }

    /// The date-time of an offset of `x` units (fractions rounded to the nanosecond).
    pub fn at(&self, x: f64) -> Option<CalendarDateTime> {
        let ns = x * self.unit_ns as f64;
        (ns.is_finite() && ns.abs() < 1e35)
            .then(|| self.after_nanos(ns.round() as i128))
            .flatten()
    }

    /// The date-time of an integer offset of `x` units (exact).
    pub fn at_int(&self, x: i64) -> Option<CalendarDateTime> {
        self.after_nanos(x as i128 * self.unit_ns as i128)
    }

    /// Decode a numeric axis column: `Timestamp(ns)` when every date exists in the
    /// proleptic Gregorian calendar, else ISO text (see the module docs).
    pub fn decode(&self, values: &ArrayRef) -> Result<ArrayRef, String> {
        let n = values.len();
        // A coordinate of many positions can come from a few bytes of zstd: the dates and
        // the column are allocated fallibly.
        let oom = |e: std::collections::TryReserveError| format!("{n} dates cannot be allocated: {e}");
        let mut dates: Vec<CalendarDateTime> = Vec::new();
        dates.try_reserve_exact(n).map_err(oom)?;
        match values.data_type() {
            // u64 offsets past i64::MAX would not survive a cast to Int64 (they become
            // NULL, whose slot reads 0: the reference date); i128 holds them exactly.
            DataType::UInt64 => {
                let v = values.as_primitive::<arrow::datatypes::UInt64Type>();
                for x in v.values().iter() {
                    let t = i128::from(*x) * i128::from(self.unit_ns);
                    dates.push(self.after_nanos(t).ok_or_else(|| out_of_range(x))?);
                }
            }
            t if t.is_integer() => {
                let v = arrow::compute::cast(values, &DataType::Int64).map_err(|e| e.to_string())?;
                for x in v.as_primitive::<Int64Type>().values().iter() {
                    dates.push(self.at_int(*x).ok_or_else(|| out_of_range(x))?);
                }
            }
            t if t.is_floating() => {
                let v = arrow::compute::cast(values, &DataType::Float64).map_err(|e| e.to_string())?;
                for x in v.as_primitive::<Float64Type>().values().iter() {
                    dates.push(self.at(*x).ok_or_else(|| out_of_range(x))?);
                }
            }
            other => return Err(format!("a time coordinate of type {other} (numbers expected)")),
        }
        let exist = self.calendar != Calendar::Day360
            && dates
                .iter()
                .all(|d| Calendar::ProlepticGregorian.day_number(d.year, d.month, d.day).is_ok());
        if !exist {
            return Ok(Arc::new(StringArray::from_iter_values(
                dates.iter().map(CalendarDateTime::iso),
            )));
        }
        let mut ns: Vec<i64> = Vec::new();
        ns.try_reserve_exact(n).map_err(oom)?;
        for d in &dates {
            match d.gregorian_nanos() {
                Some(t) => ns.push(t),
                // Paleo and control runs (years 0001-1849, or far future): microseconds
                // reach ±290 000 years, and date functions take them as they take ns.
                None => return Self::micros(&dates),
            }
        }
        Ok(Arc::new(TimestampNanosecondArray::from(ns)))
    }

    /// `dates` as `Timestamp(µs)`; an error naming a date that is not a whole
    /// microsecond or lies beyond ±290 000 years.
    fn micros(dates: &[CalendarDateTime]) -> Result<ArrayRef, String> {
        let mut us: Vec<i64> = Vec::new();
        us.try_reserve_exact(dates.len())
            .map_err(|e| format!("{} dates cannot be allocated: {e}", dates.len()))?;
        for d in dates {
            let t = d.gregorian_micros().ok_or_else(|| {
                format!(
                    "{} lies outside 1677-2262 (Timestamp(ns)) and is not a whole microsecond within ±290 000 \
                     years (Timestamp(µs))",
                    d.iso()
                )
            })?;
            us.push(t);
        }
        Ok(Arc::new(TimestampMicrosecondArray::from(us)))
    }
}

fn out_of_range(x: impl std::fmt::Display) -> String {
    format!("value {x} is out of range")
}

/// `"<unit> since <reference>"` → (unit, reference).
fn split_since(units: &str) -> Option<(&str, &str)> {
    let lower = units.to_ascii_lowercase();
    let at = lower.find(" since ")?;
    Some((units[..at].trim(), units[at + 7..].trim()))
}

fn unit_nanos(unit: &str) -> Option<i64> {
    Some(match unit.to_ascii_lowercase().as_str() {
        "days" | "day" | "d" => 86_400_000_000_000,
        "hours" | "hour" | "hr" | "hrs" | "h" => 3_600_000_000_000,
        "minutes" | "minute" | "min" | "mins" => 60_000_000_000,
        "seconds" | "second" | "sec" | "secs" | "s" => 1_000_000_000,
        "milliseconds" | "millisecond" | "msec" | "msecs" | "ms" => 1_000_000,
        "microseconds" | "microsecond" | "usec" | "usecs" | "us" => 1_000,
        "nanoseconds" | "nanosecond" | "nsec" | "nsecs" | "ns" => 1,
        _ => return None,
    })
}

/// Parse a reference date-time: the calendar fields and the UTC offset in minutes.
fn parse_reference(s: &str) -> Result<(CalendarDateTime, i64), String> {
    let mut p = Cursor {
        s: s.trim().as_bytes(),
        i: 0,
    };
    let neg = p.eat(b'-');
    let year = p.int(1, 6).ok_or("has no year")? as i64;
    let year = if neg { -year } else { year };
    let month = p.eat(b'-').then(|| p.int(1, 2)).flatten().ok_or("has no month")? as u32;
    let day = p.eat(b'-').then(|| p.int(1, 2)).flatten().ok_or("has no day")? as u32;
    let mut nanos = 0i64;
    let before_time = p.i;
    if p.eat(b'T') || p.eat(b' ') {
        p.spaces();
        if let Some(h) = p.int(1, 2) {
            let (mut m, mut sec) = (0, 0);
            if p.eat(b':') {
                m = p.int(1, 2).ok_or("has a bad minute")?;
                if p.eat(b':') {
                    sec = p.int(1, 2).ok_or("has a bad second")?;
                    if p.eat(b'.') {
                        nanos = p.fraction_nanos().ok_or("has a bad fraction")?;
                    }
                }
            }
            // 24:00:00 is the end of the day; any other field past its range is a typo,
            // not a carry into the next one.
            let end_of_day = h == 24 && m == 0 && sec == 0 && nanos == 0;
            if m > 59 || sec > 59 || (h > 23 && !end_of_day) {
                return Err("has a time of day out of range".into());
            }
            nanos += (h * 3600 + m * 60 + sec) as i64 * 1_000_000_000;
        } else {
            p.i = before_time;
        }
    }
    p.spaces();
    let offset = p.utc_offset()?;
    p.spaces();
    if p.i != p.s.len() {
        return Err(format!(
            "has unexpected text {:?}",
            String::from_utf8_lossy(&p.s[p.i..])
        ));
    }
    Ok((
        CalendarDateTime {
            year,
            month,
            day,
            nanos,
        },
        offset,
    ))
}

struct Cursor<'a> {
    s: &'a [u8],
    i: usize,
}

impl Cursor<'_> {
    fn eat(&mut self, b: u8) -> bool {
        let hit = self.s.get(self.i) == Some(&b);
        self.i += hit as usize;
        hit
    }
    fn spaces(&mut self) {
        while self.eat(b' ') {}
    }
    /// `min..=max` decimal digits.
    fn int(&mut self, min: usize, max: usize) -> Option<u64> {
        let start = self.i;
        while self.i < self.s.len() && self.s[self.i].is_ascii_digit() && self.i - start < max {
            self.i += 1;
        }
        if self.i - start < min {
            self.i = start;
            return None;
        }
        let digits = &self.s[start..self.i];
        std::str::from_utf8(digits).ok()?.parse().ok().or_else(|| {
            // More digits than u64 holds: keep the first 19.
            std::str::from_utf8(&digits[..19]).ok()?.parse().ok()
        })
    }
    /// The digits of a decimal fraction of a second, as nanoseconds: the first nine
    /// digits count, later ones are truncated (a reference written to the picosecond is
    /// still that nanosecond), and at least one digit is needed.
    fn fraction_nanos(&mut self) -> Option<i64> {
        let start = self.i;
        let mut nanos = 0i64;
        while let Some(d) = self.s.get(self.i).filter(|b| b.is_ascii_digit()) {
            if self.i - start < 9 {
                nanos = nanos * 10 + i64::from(d - b'0');
            }
            self.i += 1;
        }
        let digits = self.i - start;
        (digits > 0).then(|| nanos * 10i64.pow(9 - digits.min(9) as u32))
    }
    /// `Z`, `UTC`, `GMT`, `±h`, `±hh:mm`, `±hhmm`, or nothing: minutes east of UTC.
    fn utc_offset(&mut self) -> Result<i64, String> {
        let rest = &self.s[self.i..];
        for z in [&b"UTC"[..], b"GMT", b"Z"] {
            if rest.starts_with(z) {
                self.i += z.len();
                return Ok(0);
            }
        }
        let sign = if self.eat(b'+') {
            1
        } else if self.eat(b'-') {
            -1
        } else {
            return Ok(0);
        };
        let start = self.i;
        let h = self.int(1, 2).ok_or("has a bad UTC offset")? as i64;
        let m = if self.eat(b':') {
            self.int(2, 2).ok_or("has a bad UTC offset")? as i64
        } else if self.i - start == 2 {
            self.int(2, 2).unwrap_or(0) as i64
        } else {
            0
        };
        if h > 14 || m > 59 {
            return Err("has a UTC offset out of range".into());
        }
        Ok(sign * (h * 60 + m))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(units: &str, calendar: Option<&str>) -> BTreeMap<String, String> {
        let mut a = BTreeMap::from([("units".to_owned(), units.to_owned())]);
        if let Some(c) = calendar {
            a.insert("calendar".into(), c.into());
        }
        a
    }

    fn iso(units: &str, calendar: Option<&str>, x: f64) -> String {
        CfTime::from_attrs(&attrs(units, calendar))
            .unwrap()
            .unwrap()
            .at(x)
            .unwrap()
            .iso()
    }

    #[test]
    fn references_units_and_offsets() {
        assert_eq!(iso("hours since 1900-01-01", None, 1_086_960.0), "2024-01-01T00:00:00");
        assert_eq!(iso("days since 2000-1-1T12:00:00Z", None, 1.5), "2000-01-03T00:00:00");
        assert_eq!(
            iso("seconds since 1970-01-01 00:00:00.0", None, 0.25),
            "1970-01-01T00:00:00.250"
        );
        assert_eq!(
            iso("minutes since 2000-01-01 05:30 +05:30", None, 0.0),
            "2000-01-01T00:00:00"
        );
        assert_eq!(
            iso("Hours Since 2000-01-01 00:00:00 -6", None, 0.0),
            "2000-01-01T06:00:00"
        );
        assert_eq!(iso("msec since 2000-01-01", None, -1.0), "1999-12-31T23:59:59.999");
        assert_eq!(CfTime::from_attrs(&attrs("K", None)).unwrap(), None);
        for bad in [
            "fortnights since 2000-01-01",
            "days since yesterday",
            "days since 2000-13-01",
        ] {
            assert!(CfTime::from_attrs(&attrs(bad, None)).is_err(), "{bad}");
        }
        assert!(CfTime::from_attrs(&attrs("days since 2000-01-01", Some("lunar"))).is_err());
    }

    #[test]
    fn calendars_count_their_own_days() {
        // The standard calendar skips 1582-10-05..14; proleptic Gregorian does not.
        assert_eq!(
            iso("days since 1582-10-04", Some("standard"), 1.0),
            "1582-10-15T00:00:00"
        );
        assert_eq!(
            iso("days since 1582-10-04", Some("proleptic_gregorian"), 1.0),
            "1582-10-05T00:00:00"
        );
        assert_eq!(iso("days since 1900-02-28", Some("julian"), 1.0), "1900-02-29T00:00:00");
        assert_eq!(
            iso("days since 1900-02-28", Some("standard"), 1.0),
            "1900-03-01T00:00:00"
        );
        assert_eq!(iso("days since 2000-02-28", Some("noleap"), 1.0), "2000-03-01T00:00:00");
        assert_eq!(
            iso("days since 2001-02-28", Some("all_leap"), 1.0),
            "2001-02-29T00:00:00"
        );
        assert_eq!(
            iso("days since 2000-01-01", Some("360_day"), 59.0),
            "2000-02-30T00:00:00"
        );
        assert_eq!(
            iso("days since 2000-01-01", Some("360_day"), 360.0),
            "2001-01-01T00:00:00"
        );
        for cal in [
            Calendar::Standard,
            Calendar::Julian,
            Calendar::ProlepticGregorian,
            Calendar::NoLeap,
            Calendar::Day360,
        ] {
            for n in (-800_000i64..3_000_000).step_by(997) {
                let (y, m, d) = cal.date(n);
                assert_eq!(cal.day_number(y, m, d), Ok(n), "{cal:?} {n}");
            }
        }
    }

    #[test]
    fn columns_are_timestamps_or_text() {
        let values: ArrayRef = Arc::new(arrow::array::Int32Array::from(vec![0, 24, 48]));
        let t = CfTime::from_attrs(&attrs("hours since 2024-01-01", None))
            .unwrap()
            .unwrap();
        let col = t.decode(&values).unwrap();
        let col = col.as_primitive::<arrow::datatypes::TimestampNanosecondType>();
        assert_eq!(col.value(1), 1_704_153_600_000_000_000);
        let t = CfTime::from_attrs(&attrs("days since 2000-02-28", Some("360_day")))
            .unwrap()
            .unwrap();
        let fractional: ArrayRef = Arc::new(arrow::array::Float64Array::from(vec![0.0, 1.0, 2.5]));
        let col = t.decode(&fractional).unwrap();
        assert_eq!(col.as_string::<i32>().value(2), "2000-02-30T12:00:00");
        // Before 1677: microseconds (Python's proleptic Gregorian `date` counts 354 285
        // days from 1000-01-01 to 1970-01-01).
        let t = CfTime::from_attrs(&attrs("days since 1000-01-01", None))
            .unwrap()
            .unwrap();
        let col = t.decode(&values).unwrap();
        let col = col.as_primitive::<arrow::datatypes::TimestampMicrosecondType>();
        assert_eq!(col.value(0), -354_285 * 86_400_000_000);
        assert_eq!(col.value(2) - col.value(0), 48 * 86_400_000_000);
        // Beyond what microseconds reach (±290 000 years).
        let t = CfTime::from_attrs(&attrs("days since 300000-01-01", None))
            .unwrap()
            .unwrap();
        let err = t.decode(&values).unwrap_err();
        assert!(err.contains("lies outside"), "{err}");
    }

    #[test]
    fn long_fractions_large_offsets_and_bad_clock_fields_are_exact_or_errors() {
        // Digits past the nanosecond are truncated, however many there are.
        for frac in [
            "5",
            "500000000",
            "5000000000000000000000000",
            "5000000009999999999999999999",
        ] {
            assert_eq!(
                iso(&format!("seconds since 2000-01-01 00:00:00.{frac}"), None, 0.0),
                "2000-01-01T00:00:00.500",
                "{frac}"
            );
        }
        assert_eq!(
            iso("seconds since 2000-01-01 00:00:00.1234567891234567891234567", None, 0.0),
            "2000-01-01T00:00:00.123456789"
        );
        assert_eq!(iso("days since 2000-01-01 24:00:00", None, 0.0), "2000-01-02T00:00:00");
        for bad in [
            "days since 2000-01-01 00:99:99",
            "days since 2000-01-01 00:60",
            "days since 2000-01-01 12:00:60",
            "days since 2000-01-01 25:00",
            "days since 2000-01-01 24:00:01",
            "days since 2000-01-01 00:00:00.",
        ] {
            assert!(CfTime::from_attrs(&attrs(bad, None)).is_err(), "{bad}");
        }
        // u64 offsets past i64::MAX are far out of range, not the reference date.
        let t = CfTime::from_attrs(&attrs("seconds since 2000-01-01", None))
            .unwrap()
            .unwrap();
        let big: ArrayRef = Arc::new(arrow::array::UInt64Array::from(vec![0, u64::MAX]));
        let err = t.decode(&big).unwrap_err();
        assert!(err.contains(&u64::MAX.to_string()), "{err}");
        let small: ArrayRef = Arc::new(arrow::array::UInt64Array::from(vec![0, 86_400]));
        let col = t.decode(&small).unwrap();
        let col = col.as_primitive::<arrow::datatypes::TimestampNanosecondType>();
        assert_eq!(col.value(1), 946_771_200_000_000_000);
    }
}

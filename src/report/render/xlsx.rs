//! The spreadsheet beside the CSV (`attach = ["csv", "xlsx"]`): the CSV part's rows as a
//! workbook of typed cells — the header row in bold, numbers as numbers, ISO dates and RFC 3339
//! instants as dates (an instant in the report's timezone), every other value as text, each
//! column as wide as its content — written by rust_xlsxwriter with its document properties
//! fixed (the title, and the job's generation instant as its creation), so the same CSV makes
//! the same bytes at every render.

use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, Timelike, Utc};
use rust_xlsxwriter::{DocProperties, ExcelDateTime, Format, Workbook, XlsxError};

/// The widest a column is made, in characters.
const MAX_WIDTH: usize = 60;

/// One CSV value as a cell.
#[derive(Debug, Clone, PartialEq)]
enum Cell {
    Number(f64),
    Date(NaiveDate),
    Instant(NaiveDateTime),
    Text(String),
}

/// The workbook of `csv` (the rendered CSV part), titled `title`, its instants shown in `tz`,
/// created at `generated_at`.
pub(super) fn workbook(
    csv: &str,
    title: &str,
    tz: chrono_tz::Tz,
    generated_at: DateTime<Utc>,
) -> Result<Vec<u8>, String> {
    let rows = read(csv)?;
    write(&rows, title, tz, generated_at).map_err(|e| format!("the spreadsheet: {e}"))
}

/// The CSV's records, each field as it reads.
fn read(csv: &str) -> Result<Vec<Vec<String>>, String> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(csv.as_bytes());
    let mut rows = Vec::new();
    for (i, record) in reader.records().enumerate() {
        let record = record.map_err(|e| format!("the CSV part, record {}: {e}", i + 1))?;
        rows.push(record.iter().map(str::to_string).collect());
    }
    Ok(rows)
}

/// What a value is: a plain decimal number (not one with leading zeros, a code such as
/// `007`), an ISO date, an RFC 3339 instant (in `tz`), or text.
fn typed(value: &str, tz: chrono_tz::Tz) -> Cell {
    let digits = value.strip_prefix('-').unwrap_or(value);
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, "0"));
    let plain = !whole.is_empty()
        && whole.bytes().all(|b| b.is_ascii_digit())
        && (whole == "0" || !whole.starts_with('0'))
        && !fraction.is_empty()
        && fraction.bytes().all(|b| b.is_ascii_digit());
    if plain && let Ok(n) = value.parse::<f64>() {
        return Cell::Number(n);
    }
    if value.len() == 10
        && let Ok(d) = NaiveDate::parse_from_str(value, "%Y-%m-%d")
    {
        return Cell::Date(d);
    }
    if let Ok(t) = DateTime::parse_from_rfc3339(value) {
        return Cell::Instant(t.with_timezone(&tz).naive_local());
    }
    Cell::Text(value.to_string())
}

fn excel_date(d: NaiveDate) -> Result<ExcelDateTime, XlsxError> {
    let year = u16::try_from(d.year()).map_err(|_| XlsxError::DateTimeRangeError(d.to_string()))?;
    ExcelDateTime::from_ymd(year, d.month() as u8, d.day() as u8)
}

fn excel_instant(t: NaiveDateTime) -> Result<ExcelDateTime, XlsxError> {
    excel_date(t.date())?.and_hms(t.hour() as u16, t.minute() as u8, f64::from(t.second()))
}

fn write(
    rows: &[Vec<String>],
    title: &str,
    tz: chrono_tz::Tz,
    generated_at: DateTime<Utc>,
) -> Result<Vec<u8>, XlsxError> {
    let mut workbook = Workbook::new();
    let created = excel_instant(generated_at.naive_utc())?;
    let properties = DocProperties::new()
        .set_title(title)
        .set_author("dawnpost")
        .set_creation_datetime(&created);
    workbook.set_properties(&properties);
    let sheet = workbook.add_worksheet();
    sheet.set_name("Report")?;
    let (bold, date, instant) = (
        Format::new().set_bold(),
        Format::new().set_num_format("yyyy-mm-dd"),
        Format::new().set_num_format("yyyy-mm-dd hh:mm"),
    );
    let mut widths: Vec<usize> = Vec::new();
    for (r, row) in rows.iter().enumerate() {
        let r = u32::try_from(r).map_err(|_| XlsxError::RowColumnLimitError)?;
        for (c, value) in row.iter().enumerate() {
            let c = u16::try_from(c).map_err(|_| XlsxError::RowColumnLimitError)?;
            let shown = match (r, typed(value, tz)) {
                (0, _) => {
                    sheet.write_string_with_format(r, c, value, &bold)?;
                    value.chars().count()
                }
                (_, Cell::Number(n)) => {
                    sheet.write_number(r, c, n)?;
                    value.len()
                }
                (_, Cell::Date(d)) => {
                    sheet.write_datetime_with_format(r, c, excel_date(d)?, &date)?;
                    10
                }
                (_, Cell::Instant(t)) => {
                    sheet.write_datetime_with_format(r, c, excel_instant(t)?, &instant)?;
                    16
                }
                (_, Cell::Text(text)) => {
                    sheet.write_string(r, c, &text)?;
                    text.chars().count()
                }
            };
            let c = usize::from(c);
            if widths.len() <= c {
                widths.resize(c + 1, 0);
            }
            widths[c] = widths[c].max(shown);
        }
    }
    for (c, width) in widths.iter().enumerate() {
        let c = u16::try_from(c).map_err(|_| XlsxError::RowColumnLimitError)?;
        sheet.set_column_width(c, (width + 2).min(MAX_WIDTH) as f64)?;
    }
    if !rows.is_empty() {
        sheet.set_freeze_panes(1, 0)?;
    }
    workbook.save_to_buffer()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-30T05:30:00Z")
            .expect("an instant")
            .with_timezone(&Utc)
    }

    #[test]
    fn values_are_typed_as_a_reader_expects() {
        let tz = chrono_tz::Europe::Berlin;
        assert_eq!(typed("1842", tz), Cell::Number(1842.0));
        assert_eq!(typed("-3.25", tz), Cell::Number(-3.25));
        assert_eq!(
            typed("007", tz),
            Cell::Text("007".into()),
            "a code keeps its zeros"
        );
        assert_eq!(typed("1e5", tz), Cell::Text("1e5".into()));
        assert_eq!(typed("12.", tz), Cell::Text("12.".into()));
        assert_eq!(
            typed("2026-11-30", tz),
            Cell::Date(NaiveDate::from_ymd_opt(2026, 11, 30).expect("a date"))
        );
        let local = NaiveDate::from_ymd_opt(2026, 11, 30)
            .and_then(|d| d.and_hms_opt(6, 30, 0))
            .expect("a time");
        assert_eq!(typed("2026-11-30T05:30:00Z", tz), Cell::Instant(local));
        assert_eq!(typed("'=SUM(A1)", tz), Cell::Text("'=SUM(A1)".into()));
    }

    #[test]
    fn the_same_csv_makes_the_same_bytes() {
        let csv = "shift,picked,day\nEarly,6210,2026-11-30\n";
        let tz = chrono_tz::UTC;
        let a = workbook(csv, "Warehouse 17", tz, at()).expect("a workbook");
        let b = workbook(csv, "Warehouse 17", tz, at()).expect("a workbook");
        assert_eq!(a, b);
        assert_eq!(&a[..2], b"PK", "a zip");
        let c = workbook(csv, "Warehouse 17", tz, at() + chrono::Duration::seconds(1));
        assert_ne!(Some(a), c.ok(), "created at another instant");
    }
}

//! One page shape for the many pages that are a list of things, each with
//! its actions, a few facts and forms to add one: an organization's
//! projects, assets, payment claims and servers, and most of the control
//! tower. A page builds a [`Sheet`] from what the API answered; `sheet.html`
//! renders it with the same markup every time (labels bound to their
//! fields, every action a POST form with the visitor's form token, an
//! accessible name naming the row it acts on).

use super::{chrome, render, Chrome};
use crate::{
    api::{Answer, Down},
    format,
    i18n::{Lang, Texts},
    session::Visit,
    Console,
};
use actix_web::{http::StatusCode, HttpResponse};
use askama::Template;
use serde_json::Value;

/// The navigation above a sheet.
pub enum Nav {
    /// None (a page of its own).
    None,
    /// An organization's tabs: (its id, its name).
    Org(String, String),
    /// The control tower's tabs.
    Staff,
    /// A distributor entity's view: (its id).
    Distributor(String),
}

impl Nav {
    pub fn is_org(&self) -> bool {
        matches!(self, Nav::Org(..))
    }
}

#[derive(Template)]
#[template(path = "sheet.html")]
pub struct Sheet {
    pub c: Chrome,
    pub title: String,
    /// The page's heading (an organization's pages have its name instead).
    pub heading: String,
    pub nav: Nav,
    pub tab: &'static str,
    pub error: Option<String>,
    /// Something to copy now (a secret shown once): (what it is, the value).
    pub once: Option<(String, String)>,
    pub facts: Vec<(String, String)>,
    pub sections: Vec<Section>,
}

impl Sheet {
    pub fn new(v: &Visit, title: impl Into<String>, nav: Nav, tab: &'static str) -> Sheet {
        let title = title.into();
        Sheet {
            c: chrome(v),
            heading: title.clone(),
            title,
            nav,
            tab,
            error: None,
            once: None,
            facts: Vec::new(),
            sections: Vec::new(),
        }
    }

    pub fn fact(&mut self, label: &str, value: impl Into<String>) {
        self.facts.push((label.to_owned(), value.into()));
    }

    pub fn section(&mut self, s: Section) {
        self.sections.push(s);
    }

    /// The page, every field given an id of its own: 200, or 422 when it
    /// shows a refusal.
    pub fn answer(mut self, v: &Visit, c: &Console) -> HttpResponse {
        let status = status_of(&self.error);
        let mut n = 0;
        for s in &mut self.sections {
            let rows = s.table.iter_mut().flat_map(|t| t.rows.iter_mut());
            let forms = s
                .forms
                .iter_mut()
                .chain(rows.flat_map(|r| r.actions.iter_mut()));
            for f in forms {
                for field in &mut f.fields {
                    n += 1;
                    field.id = format!("f{n}");
                }
            }
        }
        render(v, c, status, self)
    }
}

pub struct Section {
    pub heading: String,
    pub note: Option<String>,
    pub table: Option<Table>,
    pub forms: Vec<Form>,
}

impl Section {
    pub fn new(heading: &str) -> Section {
        Section {
            heading: heading.to_owned(),
            note: None,
            table: None,
            forms: Vec::new(),
        }
    }

    pub fn table(mut self, t: Table) -> Section {
        self.table = Some(t);
        self
    }

    pub fn form(mut self, f: Form) -> Section {
        self.forms.push(f);
        self
    }

    pub fn note(mut self, n: impl Into<String>) -> Section {
        self.note = Some(n.into());
        self
    }
}

pub struct Table {
    pub cols: Vec<&'static str>,
    pub rows: Vec<Row>,
    /// Said instead of an empty table.
    pub empty: &'static str,
    /// The link to the next page of a longer list.
    pub more: Option<String>,
}

impl Table {
    pub fn new(cols: Vec<&'static str>, empty: &'static str) -> Table {
        Table {
            cols,
            rows: Vec::new(),
            empty,
            more: None,
        }
    }

    /// A "next page" link to `page` with `cursor` (a list's
    /// `x-next-cursor`), when there is one.
    pub fn more(mut self, page: &str, cursor: Option<&str>) -> Table {
        self.more = cursor.map(|k| format!("{page}?{}", cursor_query(k)));
        self
    }

    /// Whether any row has an action (the table then has a column for them).
    pub fn acts(&self) -> bool {
        self.rows.iter().any(|r| !r.actions.is_empty())
    }
}

#[derive(Default)]
pub struct Row {
    pub cells: Vec<Cell>,
    pub actions: Vec<Form>,
}

impl Row {
    pub fn text(mut self, s: impl Into<String>) -> Row {
        self.cells.push(Cell::Text(s.into()));
        self
    }

    pub fn num(mut self, s: impl Into<String>) -> Row {
        self.cells.push(Cell::Num(s.into()));
        self
    }

    /// An id, in monospace.
    pub fn code(mut self, s: impl Into<String>) -> Row {
        self.cells.push(Cell::Code(s.into()));
        self
    }

    pub fn link(mut self, href: impl Into<String>, text: impl Into<String>) -> Row {
        self.cells.push(Cell::Link(href.into(), text.into()));
        self
    }

    pub fn action(mut self, f: Form) -> Row {
        self.actions.push(f);
        self
    }
}

pub enum Cell {
    Text(String),
    /// A number or an amount, aligned right.
    Num(String),
    /// (href, text)
    Link(String, String),
    Code(String),
}

pub struct Form {
    pub action: String,
    /// A GET form (a filter): no form token.
    pub get: bool,
    pub legend: Option<String>,
    pub submit: String,
    /// The button's accessible name when the visible one is not enough
    /// (which row it acts on).
    pub aria: Option<String>,
    /// A secondary (or destructive) action: the quiet button.
    pub quiet: bool,
    pub fields: Vec<Field>,
}

impl Form {
    pub fn post(action: impl Into<String>, submit: &str) -> Form {
        Form {
            action: action.into(),
            get: false,
            legend: None,
            submit: submit.to_owned(),
            aria: None,
            quiet: false,
            fields: Vec::new(),
        }
    }

    pub fn get(action: impl Into<String>, submit: &str) -> Form {
        Form {
            get: true,
            ..Form::post(action, submit)
        }
    }

    /// A row's action: a quiet button named after the row.
    pub fn row(action: impl Into<String>, submit: &str, row_name: &str) -> Form {
        Form {
            aria: Some(format!("{submit} {row_name}")),
            quiet: true,
            ..Form::post(action, submit)
        }
    }

    pub fn legend(mut self, l: &str) -> Form {
        self.legend = Some(l.to_owned());
        self
    }

    pub fn field(mut self, f: Field) -> Form {
        self.fields.push(f);
        self
    }
}

pub enum Kind {
    Text,
    /// A whole number.
    Number,
    /// Money in major units, as typed ([`Posted::minor`]).
    Amount,
    Email,
    Url,
    Date,
    Month,
    DateTime,
    Textarea,
    /// (value, label)
    Select(Vec<(String, String)>),
    /// Checked when the value is "true".
    Check,
    Hidden,
}

pub struct Field {
    /// Set when the page is rendered.
    pub id: String,
    pub name: &'static str,
    pub label: String,
    pub kind: Kind,
    pub value: String,
    pub required: bool,
    pub max: usize,
}

impl Field {
    pub fn new(name: &'static str, label: &str, kind: Kind) -> Field {
        Field {
            id: String::new(),
            name,
            label: label.to_owned(),
            kind,
            value: String::new(),
            required: false,
            max: 1000,
        }
    }

    pub fn text(name: &'static str, label: &str) -> Field {
        Field {
            max: 200,
            ..Field::new(name, label, Kind::Text)
        }
    }

    pub fn hidden(name: &'static str, value: impl Into<String>) -> Field {
        Field::new(name, "", Kind::Hidden).value(value)
    }

    pub fn select(name: &'static str, label: &str, options: Vec<(String, String)>) -> Field {
        Field::new(name, label, Kind::Select(options))
    }

    pub fn value(mut self, v: impl Into<String>) -> Field {
        self.value = v.into();
        self
    }

    pub fn required(mut self) -> Field {
        self.required = true;
        self
    }

    pub fn max(mut self, n: usize) -> Field {
        self.max = n;
        self
    }

    pub fn checked(&self) -> bool {
        self.value == "true"
    }

    pub fn is_amount(&self) -> bool {
        matches!(self.kind, Kind::Amount)
    }

    /// The `type` of its `<input>`.
    pub fn input_type(&self) -> &'static str {
        match self.kind {
            Kind::Number => "number",
            Kind::Email => "email",
            Kind::Url => "url",
            Kind::Date => "date",
            Kind::Month => "month",
            Kind::DateTime => "datetime-local",
            Kind::Hidden => "hidden",
            Kind::Check => "checkbox",
            Kind::Text | Kind::Amount | Kind::Textarea | Kind::Select(_) => "text",
        }
    }
}

/// Options from (code, label) pairs.
pub fn options(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(v, l)| ((*v).to_owned(), (*l).to_owned()))
        .collect()
}

/// The three currencies.
pub fn currencies() -> Vec<(String, String)> {
    options(&[("TRY", "TRY"), ("EUR", "EUR"), ("USD", "USD")])
}

/// A posted form's fields, by name.
pub struct Posted(pub Vec<(String, String)>);

impl Posted {
    pub fn one(&self, k: &str) -> &str {
        self.0
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.trim())
            .unwrap_or("")
    }

    /// A field that is absent or empty is None.
    pub fn opt(&self, k: &str) -> Option<&str> {
        Some(self.one(k)).filter(|v| !v.is_empty())
    }

    pub fn checked(&self, k: &str) -> bool {
        matches!(self.one(k), "true" | "on")
    }

    /// An amount typed in major units ("1234.56", "1.234,56", "1234")
    /// as minor units, without floats; None if it is not one.
    pub fn minor(&self, k: &str) -> Option<i64> {
        format::parse_minor(self.one(k))
    }

    /// A whole number.
    pub fn int(&self, k: &str) -> Option<i64> {
        self.one(k).parse().ok()
    }
}

/// A form posted to a page: the visitor signed in, the form token theirs,
/// the ids in its path shaped as ids; else the page to answer instead.
#[allow(clippy::result_large_err)] // as org_of: the page is the answer
pub fn guard(v: Visit, c: &Console, f: &Posted, ids: &[&str]) -> Result<Visit, HttpResponse> {
    if !v.signed_in() {
        return Err(super::sign_in_first(v, c));
    }
    if !v.csrf_ok(f.one("csrf")) || !ids.iter().all(|id| super::id_shaped(id)) {
        return Err(super::form_expired(&v, c));
    }
    Ok(v)
}

/// After a form's call: done, back to `back` (a GET, so a reload does not
/// post again); refused, the page `again` with the API's reason; anything
/// else, as [`super::trouble`] says.
pub async fn finish<F, Fut>(
    v: Visit,
    c: &Console,
    got: Result<Answer, Down>,
    back: &str,
    again: F,
) -> HttpResponse
where
    F: FnOnce(Visit, Option<String>) -> Fut,
    Fut: std::future::Future<Output = HttpResponse>,
{
    match outcome(got) {
        Outcome::Done => v.redirect(c, back),
        Outcome::Refused(e) => again(v, Some(e)).await,
        Outcome::Trouble(got) => super::trouble(v, c, got.as_ref()),
    }
}

/// The status a sheet answers with: 422 when it shows a refusal.
pub fn status_of(error: &Option<String>) -> StatusCode {
    if error.is_some() {
        StatusCode::UNPROCESSABLE_ENTITY
    } else {
        StatusCode::OK
    }
}

/// GET `path` on the core host with the visitor's session: what it
/// answered, or the page to answer instead ([`super::trouble`]).
pub async fn fetch(v: Visit, c: &Console, path: &str) -> Result<(Visit, Value), HttpResponse> {
    fetch_answer(v, c, path).await.map(|(v, a)| (v, a.body))
}

/// [`fetch`], the whole answer (its body moved out, not copied).
async fn fetch_answer(
    v: Visit,
    c: &Console,
    path: &str,
) -> Result<(Visit, crate::api::Answer), HttpResponse> {
    match super::call(c, &v, reqwest::Method::GET, path, None).await {
        Ok(a) if a.ok() => Ok((v, a)),
        got => Err(super::trouble(v, c, got.as_ref())),
    }
}

/// `cursor=<k>`, encoded for a query string.
fn cursor_query(k: &str) -> String {
    url::form_urlencoded::Serializer::new(String::new())
        .append_pair("cursor", k)
        .finish()
}

/// One page of a list from `cursor` (`path` carries its query already):
/// its items and the next page's cursor.
pub async fn fetch_page(
    v: Visit,
    c: &Console,
    path: &str,
    cursor: Option<&str>,
) -> Result<(Visit, Vec<Value>, Option<String>), HttpResponse> {
    let (v, a) = match cursor {
        Some(k) => fetch_answer(v, c, &format!("{path}&{}", cursor_query(k))).await?,
        None => fetch_answer(v, c, path).await?,
    };
    let items = match a.body {
        Value::Array(items) => items,
        _ => Vec::new(),
    };
    Ok((v, items, a.next))
}

/// [`fetch`] of a list.
pub async fn fetch_list(
    v: Visit,
    c: &Console,
    path: &str,
) -> Result<(Visit, Vec<Value>), HttpResponse> {
    let (v, items, _) = fetch_page(v, c, path, None).await?;
    Ok((v, items))
}

/// The value of a `Result<T, HttpResponse>`, or return its page.
macro_rules! or_page {
    ($e:expr) => {
        match $e {
            Ok(x) => x,
            Err(page) => return page,
        }
    };
}
pub(crate) use or_page;

/// A posted form's fields (`Posted`), the visitor checked by [`guard`]
/// against the ids of the path; else return the page.
macro_rules! posted {
    ($v:ident, $c:ident, $f:ident $(, $id:expr)*) => {
        let $f = $crate::pages::sheet::Posted($f.into_inner());
        let $v = $crate::pages::sheet::or_page!($crate::pages::sheet::guard(
            $v,
            &$c,
            &$f,
            &[$($id),*]
        ));
    };
}
pub(crate) use posted;

/// What became of a form's call.
pub enum Outcome {
    Done,
    /// The API said no (400, 409, 422): its reason.
    Refused(String),
    /// Anything else: for [`super::trouble`].
    Trouble(Result<Answer, Down>),
}

pub fn outcome(got: Result<Answer, Down>) -> Outcome {
    match got {
        Ok(a) if a.ok() => Outcome::Done,
        Ok(a) if matches!(a.status, 400 | 409 | 422) => Outcome::Refused(a.error().to_owned()),
        other => Outcome::Trouble(other),
    }
}

/// A string field of a JSON object ("" when absent).
pub fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or("")
}

/// An integer field (0 when absent).
pub fn n(v: &Value, k: &str) -> i64 {
    v.get(k).and_then(Value::as_i64).unwrap_or(0)
}

/// A money field in minor units, with the object's currency.
pub fn money(v: &Value, k: &str, lang: Lang) -> String {
    format::money(n(v, k), s(v, "currency"), lang)
}

/// A time field in the visitor's zone ("" when absent or null).
pub fn when(v: &Visit, x: &Value, k: &str) -> String {
    x.get(k)
        .and_then(Value::as_str)
        .map(|at| format::datetime(at, v.tz(), v.lang))
        .unwrap_or_default()
}

/// A yes or a no.
pub fn yes_no(t: &'static Texts, b: bool) -> String {
    if b { t.yes } else { t.no }.to_owned()
}

/// The list an answer holds (empty if it holds none).
pub fn list(a: &Answer) -> Vec<Value> {
    a.body.as_array().cloned().unwrap_or_default()
}

//! The print-friendly preview of a document: plain HTML with inline styles,
//! every value escaped (the page is served with a CSP that forbids scripts).

use super::{
    model::{Invoice, InvoiceLine},
    store::Parties,
};
use hub_domain::{Currency, MinorUnits};
use std::fmt::Write;

/// `s` safe in HTML text and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Minor units as a decimal amount with its currency (`1234.50 EUR`); the
/// three currencies of the API all have two decimals.
pub fn money(minor: MinorUnits, currency: Currency) -> String {
    let sign = if minor.is_negative() { "-" } else { "" };
    let m = minor.0.unsigned_abs();
    format!("{sign}{}.{:02} {currency}", m / 100, m % 100)
}

fn date(t: Option<time::OffsetDateTime>) -> String {
    t.map(|t| t.date().to_string()).unwrap_or_default()
}

pub fn render(doc: &Invoice, lines: &[InvoiceLine], p: &Parties) -> String {
    let title = if doc.kind == super::model::Kind::Proforma {
        "Proforma invoice"
    } else {
        "Invoice"
    };
    let e = escape;
    let cur = doc.currency;
    let mut rows = String::new();
    for l in lines {
        let _ = write!(
            rows,
            "<tr><td>{}</td><td>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td></tr>",
            e(&l.description),
            e(&l.brand),
            l.qty,
            money(l.unit_minor, cur),
            money(l.amount_minor, cur),
        );
    }
    let legal = doc
        .legal_document_url
        .as_deref()
        .map(|u| format!("<p>Legal document: <a href=\"{0}\">{0}</a></p>", e(u)))
        .unwrap_or_else(|| "<p class=muted>This preview is not the legal invoice.</p>".into());
    format!(
        "<!doctype html>\n<html lang=en><head><meta charset=utf-8>\
<title>{title} {number}</title>\
<style>body{{font-family:sans-serif;margin:2em;color:#111}}table{{border-collapse:collapse;width:100%}}\
td,th{{border-bottom:1px solid #ccc;padding:.4em;text-align:left}}.n{{text-align:right}}\
.muted{{color:#666}}@media print{{body{{margin:0}}}}</style></head><body>\
<h1>{title} <span id=number>{number}</span></h1>\
<p>Status: <span id=status>{status}</span></p>\
<table><tr><td><strong>From</strong><br>{issuer}<br>{issuer_legal}<br>{address}<br>Tax ID: {tax_id}</td>\
<td><strong>To</strong><br>{org}</td>\
<td>Issued: {issued}<br>Due: {due}<br>Paid: {paid_at}</td></tr></table>\
<h2>Lines</h2><table><tr><th>Description</th><th>Brand</th><th class=n>Qty</th>\
<th class=n>Unit</th><th class=n>Amount</th></tr>{rows}</table>\
<table><tr><td>Subtotal</td><td class=n>{subtotal}</td></tr>\
<tr><td>Tax</td><td class=n>{tax}</td></tr>\
<tr><td><strong>Total</strong></td><td class=n><strong id=total>{total}</strong></td></tr>\
<tr><td>Paid</td><td class=n>{paid}</td></tr></table>\
<p>Bank transfer: {bank} IBAN {iban} SWIFT {swift}, reference {number}</p>{legal}</body></html>\n",
        number = e(&doc.number),
        status = doc.status,
        issuer = e(&p.issuer_name),
        issuer_legal = e(&p.issuer_legal_name),
        address = e(&p.issuer_address),
        tax_id = e(&p.issuer_tax_id),
        org = e(&p.org_name),
        issued = date(Some(doc.issued_at)),
        due = date(doc.due_at),
        paid_at = date(doc.paid_at),
        subtotal = money(doc.subtotal_minor, cur),
        tax = money(doc.tax_minor, cur),
        total = money(doc.total_minor, cur),
        paid = money(doc.paid_minor, cur),
        bank = e(&p.bank_name),
        iban = e(&p.bank_iban),
        swift = e(&p.bank_swift),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_in_values_is_escaped() {
        assert_eq!(
            escape(r#"<script>alert("x")</script> & 'y'"#),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;"
        );
    }

    #[test]
    fn amounts_read_as_decimals() {
        assert_eq!(money(MinorUnits(123_450), Currency::EUR), "1234.50 EUR");
        assert_eq!(money(MinorUnits(5), Currency::TRY), "0.05 TRY");
        assert_eq!(money(MinorUnits(-100), Currency::USD), "-1.00 USD");
        assert_eq!(
            money(MinorUnits(i64::MIN), Currency::USD),
            "-92233720368547758.08 USD"
        );
    }
}

/**
 * A transactional email of the size senders send, for bench:cost's `html` case: an HTML body of
 * about 19 KB (a table layout with inline styles, as email templates are built: a receipt of
 * thirty lines between a header and a footer) and its text part of about 1 KB. The other cases
 * send a 30-byte text, which hides what a body costs to keep: what is stored for the retention
 * and what every stage reads grows with it.
 *
 * DESCRIPTION
 *   htmlEmail(i, to, domain)  message i of the case, from `domain`: the same template, its figures
 *                             and names its own.
 */
const CELL = "padding:8px 12px;border-bottom:1px solid #e5e7eb;font-family:Helvetica,Arial,sans-serif;font-size:14px";

function line(i: number, k: number): string {
  const qty = 1 + ((i + k) % 4);
  const cents = 199 + ((i * 37 + k * 101) % 9800);
  return (
    `<tr><td style="${CELL};color:#111827">Item ${k + 1}: product reference PRD-${(i * 13 + k) % 100000} ` +
    `(colour ${["slate", "amber", "teal", "rose"][k % 4]}, size ${["S", "M", "L", "XL"][(i + k) % 4]})</td>` +
    `<td style="${CELL};color:#374151;text-align:center">${qty}</td>` +
    `<td style="${CELL};color:#111827;text-align:right">$${((qty * cents) / 100).toFixed(2)}</td></tr>\n`
  );
}

function html(i: number): string {
  const lines = Array.from({ length: 30 }, (_, k) => line(i, k)).join("");
  const para = (t: string) =>
    `<p style="margin:0 0 16px;font-family:Helvetica,Arial,sans-serif;font-size:15px;line-height:22px;color:#374151">${t}</p>\n`;
  return (
    `<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">` +
    `<title>Your receipt ${i}</title><style>@media (max-width:600px){.wrap{width:100%!important}.pad{padding:16px!important}}</style></head>\n` +
    `<body style="margin:0;padding:0;background:#f3f4f6"><table role="presentation" width="100%" cellpadding="0" cellspacing="0" style="background:#f3f4f6">` +
    `<tr><td align="center" style="padding:24px 0"><table role="presentation" class="wrap" width="600" cellpadding="0" cellspacing="0" ` +
    `style="background:#ffffff;border-radius:8px;overflow:hidden">\n` +
    `<tr><td class="pad" style="padding:32px 40px;background:#1f2937;color:#ffffff;font-family:Helvetica,Arial,sans-serif;font-size:22px;font-weight:bold">` +
    `Acme Store: order #${100000 + i}</td></tr>\n<tr><td class="pad" style="padding:32px 40px">\n` +
    para(
      `Hello customer ${i}, thank you for your order. We have received your payment and your items are being prepared.`,
    ) +
    para(
      `You will get another email with a tracking link as soon as your parcel leaves our warehouse, usually within one working day. ` +
        `If anything on this receipt looks wrong, reply to this email and our team will help.`,
    ) +
    `<table role="presentation" width="100%" cellpadding="0" cellspacing="0" style="border-collapse:collapse;margin:8px 0 24px">\n` +
    `<tr><th style="${CELL};text-align:left;color:#6b7280">Item</th><th style="${CELL};color:#6b7280">Qty</th>` +
    `<th style="${CELL};text-align:right;color:#6b7280">Price</th></tr>\n${lines}</table>\n` +
    para(
      `Shipping to: customer ${i}, ${10 + (i % 90)} Example Street, Springfield, postcode ${10000 + ((i * 7) % 89999)}.`,
    ) +
    `<table role="presentation" cellpadding="0" cellspacing="0" style="margin:24px 0"><tr><td style="border-radius:6px;background:#2563eb">` +
    `<a href="https://store.acme.example/orders/${100000 + i}?utm_source=email&amp;utm_medium=receipt&amp;utm_campaign=orders" ` +
    `style="display:inline-block;padding:12px 24px;font-family:Helvetica,Arial,sans-serif;font-size:15px;color:#ffffff;text-decoration:none">` +
    `View your order</a></td></tr></table>\n` +
    para(
      `Returns are free within 30 days. Keep this email as your proof of purchase; the VAT invoice is in your account under Orders.`,
    ) +
    `</td></tr>\n<tr><td class="pad" style="padding:24px 40px;background:#f9fafb;font-family:Helvetica,Arial,sans-serif;font-size:12px;line-height:18px;color:#9ca3af">` +
    `Acme Store Ltd, 1 Commerce Way, Springfield. You receive this email because you placed an order at store.acme.example. ` +
    `<a href="https://store.acme.example/help" style="color:#6b7280">Help centre</a> · ` +
    `<a href="https://store.acme.example/privacy" style="color:#6b7280">Privacy</a></td></tr>\n` +
    `</table></td></tr></table></body></html>\n`
  );
}

function text(i: number): string {
  const lines = Array.from({ length: 30 }, (_, k) => `- Item ${k + 1}: PRD-${(i * 13 + k) % 100000}`).join("\n");
  return (
    `Acme Store: order #${100000 + i}\n\nHello customer ${i}, thank you for your order. We have received your payment ` +
    `and your items are being prepared.\n\n${lines}\n\nShipping to: customer ${i}, ${10 + (i % 90)} Example Street, ` +
    `Springfield.\n\nView your order: https://store.acme.example/orders/${100000 + i}\n\nYou will get another email with a ` +
    `tracking link as soon as your parcel leaves our warehouse, usually within one working day.\n\nReturns are free within ` +
    `30 days. Keep this email as your proof of purchase; the VAT invoice is in your account under Orders.\n\n` +
    `Acme Store Ltd, 1 Commerce Way, Springfield.\n`
  );
}

/** Message i of the `html` case. */
export const htmlEmail = (i: number, to: string[], domain: string) => ({
  from: `Acme Store <orders@${domain}>`,
  to,
  subject: `Your receipt for order #${100000 + i}`,
  html: html(i),
  text: text(i),
});

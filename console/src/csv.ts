/**
 * CSV for spreadsheets. Key names and model ids come from whoever made them, so a cell that a
 * spreadsheet would run as a formula (`=`, `+`, `-`, `@`, or a leading tab or carriage return, per
 * OWASP) is neutralised with a leading `'`. A plain decimal number, negative ones included, stays as
 * it is: it is data, and Excel and LibreOffice read it as a number, not a formula.
 */
const FORMULA_START = /^[=+\-@\t\r]/;
const PLAIN_NUMBER = /^-?\d+(?:\.\d+)?$/;

export function csvCell(value: string | number): string {
  let text = String(value);
  if (FORMULA_START.test(text) && !PLAIN_NUMBER.test(text)) text = `'${text}`;
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

export function csvRow(values: ReadonlyArray<string | number>): string {
  return values.map(csvCell).join(",");
}

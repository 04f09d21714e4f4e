import { Resvg } from "@resvg/resvg-js";

export interface BarPanel {
  title: string;
  unit: string;
  bars: Array<{ label: string; value: number }>;
}

const COLORS = ["#2f6db5", "#d9822b", "#3a9b5c", "#9b59b6", "#c0392b"];
const escapeXml = (text: string) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;");

/** Panels of labelled bars, side by side, as a PNG: a chart with no browser and no canvas. */
export function barChartPng(title: string, panels: BarPanel[]): Buffer {
  const panelWidth = 260;
  const height = 356;
  const top = 76;
  const plot = 200;
  const width = panelWidth * panels.length + 20;
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="DejaVu Sans" font-size="11">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="10" y="22" font-size="15" font-weight="bold">${escapeXml(title)}</text>`,
  ];
  panels.forEach((panel, p) => {
    const x0 = 20 + p * panelWidth;
    const max = Math.max(1e-9, ...panel.bars.map((b) => (Number.isFinite(b.value) ? b.value : 0)));
    const barWidth = Math.min(50, (panelWidth - 40) / Math.max(1, panel.bars.length) - 10);
    parts.push(`<text x="${x0}" y="${top - 26}" font-weight="bold">${escapeXml(panel.title)} (${escapeXml(panel.unit)})</text>`);
    parts.push(`<line x1="${x0}" y1="${top + plot}" x2="${x0 + panelWidth - 30}" y2="${top + plot}" stroke="#444"/>`);
    panel.bars.forEach((bar, i) => {
      const value = Number.isFinite(bar.value) ? bar.value : 0;
      const h = (value / max) * plot;
      const x = x0 + 10 + i * (barWidth + 10);
      parts.push(`<rect x="${x}" y="${top + plot - h}" width="${barWidth}" height="${h}" fill="${COLORS[i % COLORS.length]}"/>`);
      parts.push(
        `<text x="${x + barWidth / 2}" y="${top + plot - h - 4}" text-anchor="middle">${Number.isFinite(bar.value) ? value.toFixed(value >= 100 ? 0 : 1) : "n/a"}</text>`,
      );
      parts.push(
        `<text x="${x + barWidth / 2}" y="${top + plot + 14 + (i % 2) * 12}" text-anchor="middle" font-size="10">${escapeXml(bar.label)}</text>`,
      );
    });
  });
  parts.push("</svg>");
  return Buffer.from(new Resvg(parts.join(""), { font: { loadSystemFonts: true } }).render().asPng());
}

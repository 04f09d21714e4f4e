import {
  BarController,
  BarElement,
  CategoryScale,
  Chart,
  Legend,
  LinearScale,
  LineController,
  LineElement,
  PointElement,
  Tooltip,
  type ChartConfiguration,
} from "chart.js";
import { useEffect, useRef } from "preact/hooks";

Chart.register(BarController, BarElement, CategoryScale, LinearScale, Legend, Tooltip, LineController, LineElement, PointElement);

export const PALETTE = ["#4f7cff", "#f59e0b", "#10b981", "#ef4444", "#8b5cf6", "#06b6d4", "#ec4899", "#84cc16"];

/** A Chart.js chart on a canvas, rebuilt when its configuration changes. */
export function ChartCanvas({ config, label }: { config: ChartConfiguration; label: string }) {
  const canvas = useRef<HTMLCanvasElement>(null);
  useEffect(() => {
    if (!canvas.current) return;
    const styles = getComputedStyle(document.documentElement);
    Chart.defaults.color = styles.getPropertyValue("--muted").trim() || "#888";
    Chart.defaults.borderColor = styles.getPropertyValue("--line").trim() || "#ddd";
    const chart = new Chart(canvas.current, {
      ...config,
      options: { animation: false, responsive: true, maintainAspectRatio: false, ...config.options },
    });
    return () => chart.destroy();
  }, [JSON.stringify(config.data), document.documentElement.dataset.theme]);
  return (
    <div class="chart-box">
      <canvas ref={canvas} role="img" aria-label={label} />
    </div>
  );
}

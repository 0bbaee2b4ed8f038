"""Line plots as plain SVG (no plotting library in the requirements), for the evaluations' reports."""

from __future__ import annotations

PLOT_WIDTH, PLOT_HEIGHT, MARGIN = 420, 300, 50
COLOURS = {"papers": "#1f77b4", "papers+thoughts": "#d62728"}


def svg_plot(title: str, x_label: str, y_label: str, series: dict[str, list[tuple[float, float]]]) -> str:
    """A line plot with markers, one polyline per series, axes from 0 to the largest value (at least 1e-9)."""
    points = [p for line in series.values() for p in line]
    x_max = max([x for x, _ in points] + [1e-9])
    y_max = max([y for _, y in points] + [1e-9])
    inner_w, inner_h = PLOT_WIDTH - 2 * MARGIN, PLOT_HEIGHT - 2 * MARGIN

    def at(x: float, y: float) -> tuple[float, float]:
        return MARGIN + inner_w * x / x_max, PLOT_HEIGHT - MARGIN - inner_h * y / y_max

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{PLOT_WIDTH}" height="{PLOT_HEIGHT}" '
             'font-family="sans-serif" font-size="11">',
             f'<text x="{PLOT_WIDTH / 2}" y="18" text-anchor="middle" font-size="13">{title}</text>',
             f'<line x1="{MARGIN}" y1="{PLOT_HEIGHT - MARGIN}" x2="{PLOT_WIDTH - MARGIN}" y2="{PLOT_HEIGHT - MARGIN}" '
             'stroke="black"/>',
             f'<line x1="{MARGIN}" y1="{MARGIN}" x2="{MARGIN}" y2="{PLOT_HEIGHT - MARGIN}" stroke="black"/>',
             f'<text x="{PLOT_WIDTH / 2}" y="{PLOT_HEIGHT - 12}" text-anchor="middle">{x_label} (0 to {x_max:.3g})'
             '</text>',
             f'<text x="14" y="{PLOT_HEIGHT / 2}" text-anchor="middle" transform="rotate(-90 14 {PLOT_HEIGHT / 2})">'
             f'{y_label} (0 to {y_max:.3g})</text>']
    for n, (name, line) in enumerate(series.items()):
        colour = COLOURS.get(name, "black")
        coords = [at(x, y) for x, y in line]
        parts.append('<polyline fill="none" stroke="{}" points="{}"/>'.format(
            colour, " ".join(f"{cx:.1f},{cy:.1f}" for cx, cy in coords)))
        parts += [f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="3" fill="{colour}"/>' for cx, cy in coords]
        parts.append(f'<text x="{PLOT_WIDTH - MARGIN}" y="{MARGIN + 14 * n}" text-anchor="end" fill="{colour}">'
                     f'{name}</text>')
    return "\n".join(parts + ["</svg>"]) + "\n"

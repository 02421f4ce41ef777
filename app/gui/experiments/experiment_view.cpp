// ExperimentView: summary.json in, table + scatter + per-variant curves + per-variant maps out
// (see experiment_view.h).
#include "app/gui/experiments/experiment_view.h"

#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QGridLayout>
#include <QHeaderView>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QMenu>
#include <QScrollArea>
#include <QSet>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <set>

#include "engine/runs/run_chain.h"
#include "engine/runs/run_reader.h"
#include "widgets/curve_plot.h"
#include "widgets/figure_export.h"
#include "widgets/heatmap_view.h"

namespace hh::gui {
namespace {

const QSize kMapMinimumSize(260, 230);  // a map below this is too small to read

// The job run folders of a variant folder, keyed as the summary's metrics are: "" for <dir>
// itself, "<sub>/" for <dir>/<sub> (a convert job's stages). Each has a run.h5 and maybe
// continuations after a resume (engine/runs/run_chain.h).
std::vector<std::pair<QString, QString>> runFolders(const QString& dir) {
  std::vector<std::pair<QString, QString>> out;
  const QDir d(dir);
  if (QFileInfo::exists(d.filePath(QStringLiteral("run.h5")))) out.emplace_back(QString(), dir);
  for (const auto& sub : d.entryList(QDir::Dirs | QDir::NoDotAndDotDot, QDir::Name))
    if (QFileInfo::exists(d.filePath(sub + QStringLiteral("/run.h5")))) out.emplace_back(sub + QLatin1Char('/'), d.filePath(sub));
  return out;
}

QComboBox* combo(QWidget* parent) {
  auto* c = new QComboBox(parent);
  c->setSizeAdjustPolicy(QComboBox::AdjustToContents);
  return c;
}

// A panel: one row of labelled choices (each choice widening with the row unless `compact`)
// above `content`, which takes the rest of the height.
QWidget* panel(QWidget* parent, const std::vector<std::pair<QString, QComboBox*>>& choices, QWidget* content,
               bool compact = false) {
  auto* box = new QWidget(parent);
  auto* layout = new QVBoxLayout(box);
  layout->setContentsMargins(0, 0, 0, 0);
  auto* row = new QHBoxLayout;
  for (const auto& [label, choice] : choices) {
    row->addWidget(new QLabel(label, box));
    row->addWidget(choice, compact ? 0 : 1);
  }
  if (compact) row->addStretch(1);
  layout->addLayout(row);
  layout->addWidget(content, 1);
  return box;
}

}  // namespace

ExperimentView::ExperimentView(QWidget* parent) : QWidget(parent) {
  title_ = new QLabel(tr("No experiment open. Run > Open an experiment\u2026 opens the folder that <tt>hedgehog experiment</tt> wrote (it holds summary.json)."), this);
  title_->setWordWrap(true);
  table_ = new QTableWidget(this);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->horizontalHeader()->setContextMenuPolicy(Qt::CustomContextMenu);
  table_->horizontalHeader()->setToolTip(tr("Right-click to choose the columns shown"));
  connect(table_->horizontalHeader(), &QWidget::customContextMenuRequested, this, [this](const QPoint& at) {
    QMenu menu(this);
    fillColumnMenu(&menu);
    menu.exec(table_->horizontalHeader()->mapToGlobal(at));
  });
  // A run's row opens its run file on the dashboard: double-click, or the row's context menu.
  connect(table_, &QTableWidget::cellDoubleClicked, this, [this](int row) { requestRun(row); });
  table_->setContextMenuPolicy(Qt::CustomContextMenu);
  connect(table_, &QWidget::customContextMenuRequested, this, [this](const QPoint& at) {
    const int row = table_->rowAt(at.y());
    if (runFileOf(row).isEmpty()) return;
    QMenu menu(this);
    menu.addAction(tr("Open the run on the dashboard"), this, [this, row] { requestRun(row); });
    menu.exec(table_->viewport()->mapToGlobal(at));
  });
  xChoice_ = combo(this);
  yChoice_ = combo(this);
  scalarChoice_ = combo(this);
  pairChoice_ = combo(this);
  scatter_ = new widgets::CurvePlot(this);
  scatter_->setTitle(tr("Variants"));
  scatter_->setLegendVisible(true);
  curves_ = new widgets::CurvePlot(this);
  curves_->setLegendVisible(true);
  mapsPanel_ = new QWidget(this);
  mapsGrid_ = new QGridLayout(mapsPanel_);
  mapsGrid_->setContentsMargins(0, 0, 0, 0);
  connect(xChoice_, &QComboBox::currentTextChanged, this, [this] { refreshScatter(); });
  connect(yChoice_, &QComboBox::currentTextChanged, this, [this] { refreshScatter(); });
  connect(scalarChoice_, &QComboBox::currentTextChanged, this, [this] { refreshCurves(); });
  connect(pairChoice_, &QComboBox::currentTextChanged, this, [this] { refreshMaps(); });
  arrange();
}

// The table on top; the scatter and the curves side by side; the maps below, scrolling when there
// are many variants (each keeps a readable size).
void ExperimentView::arrange() {
  auto* mapsScroll = new QScrollArea(this);
  mapsScroll->setWidgetResizable(true);
  mapsScroll->setFrameShape(QFrame::NoFrame);
  mapsScroll->setWidget(mapsPanel_);
  auto* plots = new QSplitter(Qt::Horizontal, this);
  plots->addWidget(panel(this, {{tr("x"), xChoice_}, {tr("y"), yChoice_}}, scatter_));
  plots->addWidget(panel(this, {{tr("over steps"), scalarChoice_}}, curves_));
  auto* body = new QSplitter(Qt::Vertical, this);
  body->addWidget(table_);
  body->addWidget(plots);
  body->addWidget(panel(this, {{tr("last snapshot of layer, head"), pairChoice_}}, mapsScroll, /*compact=*/true));
  body->setStretchFactor(0, 1);
  body->setStretchFactor(1, 3);
  body->setStretchFactor(2, 3);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(title_);
  layout->addWidget(body, 1);
}

namespace {

// A number of summary.json: NaN where it wrote a string ("nan", "inf").
double jsonNumber(const QJsonValue& v) {
  return v.isDouble() ? v.toDouble() : std::nan("");
}

// The variants summary.json lists, with their folders beside it; an error naming the file, empty
// on success.
template <class Variant>
QString readVariants(const QString& file, QJsonObject& root, std::vector<Variant>& variants) {
  QFile in(file);
  if (!in.open(QIODevice::ReadOnly)) return QObject::tr("%1: cannot open (run `hedgehog experiment` first)").arg(file);
  QJsonParseError error{};
  const auto doc = QJsonDocument::fromJson(in.readAll(), &error);
  if (doc.isNull() || !doc.isObject())
    return QObject::tr("%1: not an experiment summary (%2)")
        .arg(file, doc.isNull() ? error.errorString() : QObject::tr("not a JSON object"));
  root = doc.object();
  const QString dir = QFileInfo(file).absolutePath();
  for (const auto& item : root.value(QStringLiteral("variants")).toArray()) {
    const auto o = item.toObject();
    Variant v;
    v.name = o.value(QStringLiteral("name")).toString();
    v.status = o.value(QStringLiteral("status")).toString();
    v.seconds = o.value(QStringLiteral("seconds")).toDouble();
    // Variant folders are found beside summary.json (the recorded run_dir may be relative to elsewhere).
    v.runDir = QDir(dir).filePath(v.name);
    const auto metrics = o.value(QStringLiteral("metrics")).toObject();
    for (auto it = metrics.begin(); it != metrics.end(); ++it)
      v.metrics[it.key()] = jsonNumber(it.value());
    if (!v.name.isEmpty()) variants.push_back(std::move(v));
  }
  if (variants.empty()) return QObject::tr("%1: the summary lists no variants").arg(file);
  return {};
}

// "difference mean +- sd, p, lower / higher" of a group's "against_baseline" metric.
QString pairedText(const QJsonObject& m) {
  const double mean = jsonNumber(m.value(QStringLiteral("diff_mean")));
  const double sd = jsonNumber(m.value(QStringLiteral("diff_sd")));
  const double p = jsonNumber(m.value(QStringLiteral("p")));
  QString text = (mean > 0 ? QStringLiteral("+") : QString()) + QString::number(mean, 'g', 4);
  if (!std::isnan(sd)) text += QStringLiteral(" \u00b1 %1").arg(QString::number(sd, 'g', 2));
  if (!std::isnan(p)) text += QObject::tr(", p %1").arg(QString::number(p, 'g', 2));
  return text + QObject::tr(", %1 lower / %2 higher")
                    .arg(m.value(QStringLiteral("lower")).toInt())
                    .arg(m.value(QStringLiteral("higher")).toInt());
}

// One of summary.json's "groups" (engine/jobs/experiment_groups.h).
template <class Group>
Group readGroup(const QJsonObject& o) {
  Group g;
  g.name = o.value(QStringLiteral("name")).toString();
  for (const auto& run : o.value(QStringLiteral("runs")).toArray()) g.runs << run.toString();
  g.completed = o.value(QStringLiteral("completed")).toInt();
  const auto metrics = o.value(QStringLiteral("metrics")).toObject();
  for (auto it = metrics.begin(); it != metrics.end(); ++it) {
    const auto m = it.value().toObject();
    g.meanSd[it.key()] = {jsonNumber(m.value(QStringLiteral("mean"))), jsonNumber(m.value(QStringLiteral("sd")))};
  }
  const auto paired = o.value(QStringLiteral("against_baseline")).toObject();
  g.baseline = paired.value(QStringLiteral("baseline")).toString();
  const auto pairedMetrics = paired.value(QStringLiteral("metrics")).toObject();
  for (auto it = pairedMetrics.begin(); it != pairedMetrics.end(); ++it)
    g.againstBaseline[it.key()] = pairedText(it.value().toObject());
  return g;
}

}  // namespace

QString ExperimentView::runFileOf(int row) const {
  const int index = row - int(groups_.size()) - baselineRowCount();  // the runs' rows come last
  if (row < 0 || index < 0 || index >= int(variants_.size())) return {};
  const auto folders = runFolders(variants_[size_t(index)].runDir);
  return folders.empty() ? QString() : QDir(folders.front().second).filePath(QStringLiteral("run.h5"));
}

void ExperimentView::requestRun(int row) {
  const QString file = runFileOf(row);
  if (!file.isEmpty()) Q_EMIT runRequested(file);
}

QString ExperimentView::open(const QString& path) {
  return openKeeping(path, {});
}

QString ExperimentView::reload() {
  if (dir_.isEmpty()) return tr("no experiment is open");
  return openKeeping(dir_, {xChoice_->currentText(), yChoice_->currentText(), scalarChoice_->currentText(),
                            pairChoice_->currentText()});
}

QString ExperimentView::openKeeping(const QString& path, const QStringList& kept) {
  const QString file = QFileInfo(path).isDir() ? QDir(path).filePath(QStringLiteral("summary.json")) : path;
  QJsonObject root;
  std::vector<Variant> variants;
  // What is on screen stays as it was when the file is refused (it was half replaced).
  if (const QString error = readVariants(file, root, variants); !error.isEmpty()) return error;
  dir_ = QFileInfo(file).absolutePath();
  variants_ = std::move(variants);
  groups_.clear();
  for (const auto& item : root.value(QStringLiteral("groups")).toArray())
    groups_.push_back(readGroup<Group>(item.toObject()));
  const auto text = [&](const char* key) { return root.value(QLatin1String(key)).toString().toHtmlEscaped(); };
  title_->setText(QStringLiteral("<b>%1</b> (%2, %3 variants) &nbsp; %4<br>%5")
                      .arg(text("name"), text("job"), QString::number(variants_.size()), dir_.toHtmlEscaped(),
                           text("description")));
  fillTable();
  fillChoices(kept);
  refreshScatter();
  refreshCurves();
  refreshMaps();
  return {};
}

// Choices: the metrics every variant with metrics has (one that failed before its run file has
// none and is left out, not allowed to empty the lists); the scalars and snapshot pairs of the
// first variant whose run files can be read.
void ExperimentView::fillChoices(const QStringList& kept) {
  std::set<QString> metricKeys;
  bool first = true;
  for (const auto& v : variants_) {
    if (v.metrics.empty()) continue;
    if (first)
      for (const auto& [k, value] : v.metrics) metricKeys.insert(k);
    for (auto it = metricKeys.begin(); it != metricKeys.end();) it = v.metrics.count(*it) ? std::next(it) : metricKeys.erase(it);
    first = false;
  }
  QStringList scalars, pairs;
  for (const auto& v : variants_) {
    for (const auto& [prefix, folder] : runFolders(v.runDir)) {
      try {
        const auto reader = runs::RunReader::open(QDir(folder).filePath(QStringLiteral("run.h5")).toStdString());
        for (const auto& s : reader.header().layout.scalars) scalars << prefix + QString::fromStdString(s.name);
        if (pairs.isEmpty())
          for (const auto& p : reader.header().layout.snapshots.pairs)
            pairs << QStringLiteral("%1,%2").arg(p.layer).arg(p.head);
      } catch (const std::exception&) {
      }
    }
    if (!scalars.isEmpty()) break;
  }
  for (QComboBox* c : {xChoice_, yChoice_, scalarChoice_, pairChoice_}) {
    const QSignalBlocker block(c);
    c->clear();
  }
  for (const auto& k : metricKeys) xChoice_->addItem(k), yChoice_->addItem(k);
  scalarChoice_->addItems(scalars);
  pairChoice_->addItems(pairs);
  // The choice kept from before (a reload), else the first preferred one there is, else `fallback`.
  auto pick = [&kept](int slot, QComboBox* c, QStringList preferred, int fallback) {
    const QSignalBlocker block(c);
    if (slot < kept.size() && !kept[slot].isEmpty()) preferred.prepend(kept[slot]);
    for (const auto& p : preferred)
      if (c->findText(p) >= 0) return c->setCurrentIndex(c->findText(p));
    c->setCurrentIndex(std::min(fallback, c->count() - 1));
  };
  pick(0, xChoice_, {QStringLiteral("attention_entropy"), QStringLiteral("evaluate/kl_mean_trained")}, 0);
  pick(1, yChoice_,
       {QStringLiteral("test_accuracy"), QStringLiteral("perplexity"), QStringLiteral("perplexity_converted"),
        QStringLiteral("evaluate/perplexity_converted")},
       1);
  pick(2, scalarChoice_, {QStringLiteral("accuracy"), QStringLiteral("val_loss"), QStringLiteral("distill/val_loss")},
       0);
  pick(3, pairChoice_, {}, int(pairs.size()) - 1);  // the last pair: the top layer's last head
}

bool ExperimentView::setScatterAxes(const QString& x, const QString& y) {
  if (xChoice_->findText(x) < 0 || yChoice_->findText(y) < 0) return false;
  xChoice_->setCurrentText(x);
  yChoice_->setCurrentText(y);
  refreshScatter();
  return true;
}

bool ExperimentView::setCurveScalar(const QString& name) {
  if (scalarChoice_->findText(name) < 0) return false;
  scalarChoice_->setCurrentText(name);
  refreshCurves();
  return true;
}

bool ExperimentView::setMapPair(int layer, int head) {
  const QString text = QStringLiteral("%1,%2").arg(layer).arg(head);
  if (pairChoice_->findText(text) < 0) return false;
  pairChoice_->setCurrentText(text);
  refreshMaps();
  return true;
}

void ExperimentView::refreshScatter() {
  // One series per variant, one point each: the legend names the points.
  scatter_->clear();
  const QString x = xChoice_->currentText(), y = yChoice_->currentText();
  if (x.isEmpty() || y.isEmpty()) return;
  // A declared variant's repeats share a series (and a colour); any other variant is its own.
  std::vector<std::pair<QString, QStringList>> series;
  QSet<QString> grouped;
  for (const auto& g : groups_) {
    series.emplace_back(g.runs.size() == 1 ? tr("%1 (1 run)").arg(g.name)
                                           : tr("%1 (%2 runs)").arg(g.name, QString::number(g.runs.size())),
                        g.runs);
    for (const auto& run : g.runs) grouped.insert(run);
  }
  for (const auto& v : variants_)
    if (!grouped.contains(v.name)) series.emplace_back(v.name, QStringList{v.name});
  for (const auto& [label, names] : series) {
    QVector<double> xs, ys;
    for (const auto& v : variants_)
      if (names.contains(v.name) && v.metrics.count(x) && v.metrics.count(y))  // none when it failed early
        xs << v.metrics.at(x), ys << v.metrics.at(y);
    if (xs.isEmpty()) continue;
    const int i = scatter_->addSeries(label, xs, ys);
    scatter_->setSeriesStyle(i, widgets::CurvePlot::SeriesStyle::Points, 2.0);
  }
  scatter_->setAxisLabels(x, y);
  scatter_->setTitle(groups_.empty() ? tr("%1 against %2, one point per variant").arg(y, x)
                                     : tr("%1 against %2, one point per run").arg(y, x));
  scatter_->rescaleAxes();
}

void ExperimentView::refreshCurves() {
  curves_->clear();
  const QString name = scalarChoice_->currentText();
  if (name.isEmpty()) return;
  const int slash = name.lastIndexOf(QLatin1Char('/'));
  const QString sub = slash >= 0 ? name.left(slash) : QString(), scalar = slash >= 0 ? name.mid(slash + 1) : name;
  // With repeats, a declared variant's runs share its colour (the scatter's), a dash per repeat.
  std::map<QString, std::pair<int, int>> groupAndRepeat;
  for (size_t g = 0; g < groups_.size(); ++g)
    for (int r = 0; r < groups_[g].runs.size(); ++r) groupAndRepeat[groups_[g].runs[r]] = {int(g), r};
  const Qt::PenStyle dashes[] = {Qt::SolidLine, Qt::DashLine, Qt::DotLine, Qt::DashDotLine, Qt::DashDotDotLine};
  for (const auto& v : variants_) {
    // run.h5 and its continuations when the variant was resumed: one curve from start to end.
    const auto chain = runs::runChain((sub.isEmpty() ? v.runDir : QDir(v.runDir).filePath(sub)).toStdString());
    const auto series = runs::chainedScalars(chain, scalar.toStdString());
    if (series.steps.empty()) continue;  // a variant without this scalar (or not run yet) has no curve
    QVector<double> xs, ys;
    for (size_t i = 0; i < series.steps.size(); ++i) xs << double(series.steps[i]), ys << series.values[i];
    const auto grouped = groupAndRepeat.find(v.name);
    const bool inGroup = grouped != groupAndRepeat.end();
    const int index =
        curves_->addSeries(v.name, xs, ys, {}, inGroup ? widgets::seriesPaletteColor(grouped->second.first) : QColor());
    if (inGroup) curves_->setSeriesDash(index, dashes[grouped->second.second % 5]);
    curves_->setSeriesStyle(index, xs.size() > 60 ? widgets::CurvePlot::SeriesStyle::Line : widgets::CurvePlot::SeriesStyle::LineAndPoints, 1.5);
  }
  curves_->setAxisLabels(tr("step"), name);
  curves_->setTitle(tr("%1 over steps").arg(name));
  curves_->rescaleAxes();
}

void ExperimentView::refreshMaps() {
  for (auto* m : maps_) delete m;
  maps_.clear();
  const auto parts = pairChoice_->currentText().split(QLatin1Char(','));
  if (parts.size() != 2) return;
  const int layer = parts[0].toInt(), head = parts[1].toInt();
  const int columns = std::max(1, std::min(4, int(variants_.size())));
  for (const auto& v : variants_) {
    auto* view = new widgets::HeatmapView(mapsPanel_);
    view->setMinimumSize(kMapMinimumSize);
    view->setValueLabel(tr("weight"));
    view->setTitle(tr("%1: no snapshot").arg(v.name));
    std::vector<std::string> files;  // every stage's run files, each stage's latest first
    for (const auto& [prefix, folder] : runFolders(v.runDir)) {
      const auto chain = runs::runChain(folder.toStdString());
      files.insert(files.end(), chain.rbegin(), chain.rend());
    }
    for (const auto& path : files) {
      try {
        const auto reader = runs::RunReader::open(path);
        const auto& pairs = reader.header().layout.snapshots.pairs;
        size_t p = 0;
        while (p < pairs.size() && (pairs[p].layer != layer || pairs[p].head != head)) ++p;
        if (p == pairs.size() || reader.snapshotCount() == 0) continue;
        const auto snap = reader.snapshot(-1);
        const size_t cell = size_t(snap.size) * size_t(snap.size);
        std::vector<float> linear(snap.linear.begin() + long(p * cell), snap.linear.begin() + long((p + 1) * cell));
        const bool isLinear = !linear.empty() && !std::isnan(linear.front());
        std::vector<float> shown = isLinear ? linear
                                            : std::vector<float>(snap.softmax.begin() + long(p * cell), snap.softmax.begin() + long((p + 1) * cell));
        view->setMatrix(snap.size, snap.size, std::move(shown));
        // Two lines: a long variant name and its details do not fit a narrow panel on one.
        view->setTitle(tr("%1\n%2, step %3").arg(v.name, isLinear ? tr("linear") : tr("softmax")).arg(snap.step));
        break;
      } catch (const std::exception&) {
      }
    }
    mapsGrid_->addWidget(view, int(maps_.size()) / columns, int(maps_.size()) % columns);
    view->show();  // children added to a visible panel stay hidden until shown
    maps_.push_back(view);
  }
}

QString ExperimentView::exportFigures(const QString& dir, int width, int height) {
  if (!QDir().mkpath(dir)) return tr("%1: cannot create the folder").arg(dir);
  widgets::FigureExportOptions options;
  options.size = QSize(width, height);
  scatter_->replotNow();  // fit the axes to the data now (replots are otherwise deferred)
  curves_->replotNow();
  for (const auto& [widget, name] : std::vector<std::pair<QWidget*, QString>>{
           {scatter_, QStringLiteral("scatter.png")}, {curves_, QStringLiteral("curves.png")}}) {
    const auto r = widgets::exportFigure(widget, QDir(dir).filePath(name), options);
    if (!r) return r.error;
  }
  if (maps_.empty()) return {};  // no run has attention snapshots (a language-model experiment): no maps.png
  const int rows = (int(maps_.size()) + 3) / 4;
  // 320 px a row, laid out at that size (the scroll area would otherwise fit the panel to its
  // viewport and the render would be scaled).
  const QSize previousMinimum = mapsPanel_->minimumSize();
  mapsPanel_->setMinimumSize(width, std::max(1, rows) * 320);
  mapsPanel_->resize(mapsPanel_->minimumSize());
  options.size = mapsPanel_->size();
  const auto r = widgets::exportFigure(mapsPanel_, QDir(dir).filePath(QStringLiteral("maps.png")), options);
  mapsPanel_->setMinimumSize(previousMinimum);
  return r ? QString() : r.error;
}

}  // namespace hh::gui

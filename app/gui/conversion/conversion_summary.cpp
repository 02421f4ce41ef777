// The summary of a finished conversion; see conversion_summary.h.
#include "app/gui/conversion/conversion_summary.h"

#include <QDir>
#include <QFileInfo>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QTableWidget>
#include <QVBoxLayout>

#include <cmath>

#include "widgets/heatmap_view.h"

namespace hh::gui {
namespace {

QString summaryNumber(double v, int digits = 3) {
  if (std::isnan(v)) return QStringLiteral("\u2014");
  // Values too small for the fixed digits (a KL of 3e-5) keep as many significant ones.
  if (v != 0 && std::abs(v) < std::pow(10.0, -digits)) return QString::number(v, 'g', digits);
  return QString::number(v, 'f', digits);
}

// "(12.3x lower)", "(1.5x higher)" or "(to zero)": how the distilled KL compares with the untrained.
QString klChange(double untrained, double distilled) {
  if (distilled == 0) return QObject::tr("(to zero)");
  if (distilled <= untrained)
    return QObject::tr("(%1\u00d7 lower)").arg(QString::number(untrained / distilled, 'f', 1));
  return QObject::tr("(%1\u00d7 higher)").arg(QString::number(distilled / untrained, 'f', 1));
}

QString duration(double seconds) {
  if (std::isnan(seconds) || seconds <= 0) return {};
  const int s = int(std::lround(seconds));
  return s >= 60 ? QStringLiteral("%1m%2s").arg(s / 60).arg(s % 60, 2, 10, QLatin1Char('0'))
                 : QStringLiteral("%1 s").arg(s);
}

QString headName(const HeadScore& h) {
  return QStringLiteral("L%1H%2 %3").arg(h.layer).arg(h.head).arg(QString::number(h.kl, 'g', 3));
}

QString mapLabel(const QString& name) {
  return name == QLatin1String("trained") ? QObject::tr("this model (trained maps)") : name + QObject::tr(", untrained");
}

QLabel* sectionTitle(const QString& text) {
  auto* label = new QLabel(QStringLiteral("<b>%1</b>").arg(text));
  return label;
}

}  // namespace

ConversionSummaryView::ConversionSummaryView(QWidget* parent) : QWidget(parent) {
  createTexts();
  createTables();
  createLinks();

  auto* left = new QVBoxLayout;
  left->addWidget(sectionTitle(tr("Every feature map on the evaluation text")));
  left->addWidget(maps_, 1);
  auto* right = new QVBoxLayout;
  right->addWidget(heads_, 1);
  right->addWidget(headList_);
  auto* middle = new QHBoxLayout;
  middle->addLayout(left, 1);
  middle->addLayout(right, 1);
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(inspect_);
  buttons->addWidget(distillCurves_);
  buttons->addWidget(finetuneCurves_);
  buttons->addWidget(evaluateRun_);
  buttons->addStretch(1);

  auto* layout = new QVBoxLayout(this);
  layout->addWidget(headline_);
  layout->addWidget(quality_);
  layout->addWidget(kl_);
  layout->addLayout(middle, 1);
  layout->addWidget(paths_);
  layout->addLayout(buttons);
}

// The headline, the quality line and the KL line: selectable text.
void ConversionSummaryView::createTexts() {
  headline_ = new QLabel;
  headline_->setObjectName(QStringLiteral("summaryHeadline"));
  headline_->setWordWrap(true);
  headline_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  quality_ = new QLabel;
  quality_->setObjectName(QStringLiteral("summaryQuality"));
  quality_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  kl_ = new QLabel;
  kl_->setObjectName(QStringLiteral("summaryKl"));
  kl_->setWordWrap(true);
  kl_->setTextInteractionFlags(Qt::TextSelectableByMouse);
}

// Every feature map's row, and the per-head KL map with its list.
void ConversionSummaryView::createTables() {
  maps_ = new QTableWidget(0, 4);
  maps_->setHorizontalHeaderLabels({tr("Feature map"), tr("KL to softmax"), tr("entropy"), tr("monotonicity")});
  maps_->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Stretch);
  maps_->verticalHeader()->hide();
  maps_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  maps_->setSelectionMode(QAbstractItemView::NoSelection);
  maps_->setToolTip(tr("Measured by the evaluate stage on the evaluation text: mean over layers and heads of "
                       "KL(softmax || map) in nats, the map's attention entropy in nats, and the Spearman "
                       "rank correlation of weight with q.k (monotonicity)"));

  heads_ = new widgets::HeatmapView;
  heads_->setTitle(tr("KL to softmax per head (this model's maps)"));
  heads_->setValueLabel(tr("KL (nats)"));
  heads_->setAxisTitles(tr("head"), tr("layer"));
  heads_->setMinimumSize(320, 220);
  headList_ = new QLabel;
  headList_->setObjectName(QStringLiteral("summaryHeads"));
  headList_->setWordWrap(true);
}

// The files' paths and the buttons that open the model and the stages' runs.
void ConversionSummaryView::createLinks() {
  paths_ = new QLabel;
  paths_->setWordWrap(true);
  paths_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  inspect_ = new QPushButton(tr("Open the converted model in the inspector"));
  distillCurves_ = new QPushButton(tr("Distillation curves"));
  finetuneCurves_ = new QPushButton(tr("Finetuning curves"));
  evaluateRun_ = new QPushButton(tr("Evaluation run"));
  connect(inspect_, &QPushButton::clicked, this, [this] { Q_EMIT openModelRequested(result_.exportPath); });
  connect(distillCurves_, &QPushButton::clicked, this, [this] { Q_EMIT openRunRequested(result_.distillRun); });
  connect(finetuneCurves_, &QPushButton::clicked, this, [this] { Q_EMIT openRunRequested(result_.finetuneRun); });
  connect(evaluateRun_, &QPushButton::clicked, this, [this] { Q_EMIT openRunRequested(result_.evaluateRun); });
}

void ConversionSummaryView::setResult(const ConversionResult& result) {
  result_ = result;
  const ConversionResult& r = result_;
  QString headline = tr("<span style='font-size:large'><b>Conversion %1</b></span> &nbsp; %2 \u2192 %3")
                         .arg(r.status.toHtmlEscaped(), QDir::toNativeSeparators(r.teacher).toHtmlEscaped(),
                              r.featureMap.toHtmlEscaped());
  if (!r.rule.isEmpty()) headline += tr(", rule %1").arg(r.rule.toHtmlEscaped());
  if (const QString d = duration(r.seconds); !d.isEmpty()) headline += tr(" &nbsp;\u00b7&nbsp; %1").arg(d);
  if (r.status != QLatin1String("completed") && !r.statusMessage.isEmpty())
    headline += QStringLiteral("<br>") + r.statusMessage.toHtmlEscaped();
  headline_->setText(headline);

  QString quality;
  if (!std::isnan(r.qualityOriginal) && !std::isnan(r.qualityConverted)) {
    const double change = r.lm() ? r.qualityConverted / r.qualityOriginal - 1 : r.qualityConverted - r.qualityOriginal;
    const bool close = r.lm() ? change <= 0.10 : change >= -0.01;
    const QString colour = close ? QStringLiteral("#1a7f37") : QStringLiteral("#b35900");
    quality =
        r.lm()
            ? tr("Perplexity <b>%1</b> (teacher) \u2192 <b>%2</b> (converted) <span style='color:%3'>%4%5 %</span>")
                  .arg(summaryNumber(r.qualityOriginal, 2), summaryNumber(r.qualityConverted, 2), colour,
                       change >= 0 ? QStringLiteral("+") : QString(), QString::number(100 * change, 'f', 1))
            : tr("Accuracy <b>%1</b> (teacher) \u2192 <b>%2</b> (converted) <span style='color:%3'>%4%5 points</span>")
                  .arg(summaryNumber(r.qualityOriginal, 3), summaryNumber(r.qualityConverted, 3), colour,
                       change >= 0 ? QStringLiteral("+") : QString(), QString::number(100 * change, 'f', 1));
  } else {
    quality = tr("No quality measured (the evaluate stage did not run or did not finish)");
  }
  quality_->setText(QStringLiteral("<span style='font-size:large'>%1</span>").arg(quality));

  QString kl;
  if (!std::isnan(r.klUntrained) && !std::isnan(r.klDistilled))
    kl = tr("KL to softmax on the distillation's probe text: %1 before distillation \u2192 %2 after %3")
             .arg(summaryNumber(r.klUntrained), summaryNumber(r.klDistilled), klChange(r.klUntrained, r.klDistilled));
  else
    kl = tr("KL to softmax before and after distillation: not measured");
  if (!std::isnan(r.softmaxEntropy))
    kl += tr(" \u00b7 softmax entropy on the evaluation text %1 nats").arg(summaryNumber(r.softmaxEntropy));
  kl_->setText(kl);

  fillMaps();
  fillHeads();
  fillPaths();
}

void ConversionSummaryView::fillMaps() {
  const auto& maps = result_.maps;
  maps_->setRowCount(int(maps.size()) + (std::isnan(result_.softmaxEntropy) ? 0 : 1));
  auto cell = [this](int row, int col, const QString& text, bool bold) {
    auto* item = new QTableWidgetItem(text);
    if (col > 0) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    QFont font = item->font();
    font.setBold(bold);
    item->setFont(font);
    maps_->setItem(row, col, item);
  };
  int row = 0;
  if (!std::isnan(result_.softmaxEntropy)) {
    cell(row, 0, tr("softmax (the teacher)"), false);
    cell(row, 1, QStringLiteral("0"), false);
    cell(row, 2, summaryNumber(result_.softmaxEntropy), false);
    cell(row, 3, QStringLiteral("1"), false);
    ++row;
  }
  for (const MapScore& m : maps) {
    const bool own = m.name == QLatin1String("trained");
    cell(row, 0, mapLabel(m.name), own);
    cell(row, 1, summaryNumber(m.kl), own);
    cell(row, 2, summaryNumber(m.entropy), own);
    cell(row, 3, summaryNumber(m.monotonicity), own);
    ++row;
  }
  maps_->resizeColumnsToContents();
  maps_->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Stretch);
}

void ConversionSummaryView::fillHeads() {
  const ConversionResult& r = result_;
  if (r.layers <= 0 || r.heads <= 0) {
    heads_->clear();
    headList_->setText(tr("No per-head KL (the evaluate stage did not store one)"));
    return;
  }
  std::vector<float> values(r.headKl.begin(), r.headKl.end());
  heads_->setMatrix(r.layers, r.heads, std::move(values));
  QStringList layers, heads;
  for (int l = 0; l < r.layers; ++l) layers << QStringLiteral("L%1").arg(l);
  for (int h = 0; h < r.heads; ++h) heads << QStringLiteral("h%1").arg(h);
  heads_->setTokenLabels(layers, heads);
  QStringList best, worst;
  for (const auto& h : r.bestHeads) best << headName(h);
  for (const auto& h : r.worstHeads) worst << headName(h);
  headList_->setText(tr("Closest to softmax: %1<br>Furthest: %2").arg(best.join(QStringLiteral(", ")),
                                                                    worst.join(QStringLiteral(", "))));
}

void ConversionSummaryView::fillPaths() {
  const ConversionResult& r = result_;
  QString text = tr("Run file: %1").arg(QDir::toNativeSeparators(r.runFile).toHtmlEscaped());
  text += QStringLiteral("<br>") + (r.exportPath.isEmpty() ? tr("No model exported")
                                                           : tr("Converted model: %1").arg(r.exportPath.toHtmlEscaped()));
  paths_->setText(text);
  inspect_->setEnabled(!r.exportPath.isEmpty() && QFileInfo(r.exportPath).isDir());
  distillCurves_->setEnabled(!r.distillRun.isEmpty());
  finetuneCurves_->setEnabled(!r.finetuneRun.isEmpty());
  evaluateRun_->setEnabled(!r.evaluateRun.isEmpty());
}

QString ConversionSummaryView::headlineText() const { return headline_->text(); }
QString ConversionSummaryView::qualityText() const { return quality_->text(); }
QString ConversionSummaryView::klText() const { return kl_->text(); }
QString ConversionSummaryView::headsText() const { return headList_->text(); }

}  // namespace hh::gui

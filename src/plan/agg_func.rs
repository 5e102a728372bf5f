//! [`AggFunc`]: the aggregate functions the pushdown computes, their SQL names, and the
//! families the fold treats alike (moments, co-moments, order statistics).

/// An aggregate function the pushdown computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AggFunc {
    CountStar,
    Count,
    Sum,
    Avg,
    Min,
    Max,
    VarPop,
    VarSamp,
    StddevPop,
    StddevSamp,
    /// `corr(x, y)`.
    Corr,
    /// `covar_pop(x, y)`.
    CovarPop,
    /// `covar_samp(x, y)` (`covar`).
    CovarSamp,
    /// `regr_slope(y, x)` and the other linear regressions of `y` on `x`.
    RegrSlope,
    RegrIntercept,
    RegrR2,
    RegrAvgX,
    RegrAvgY,
    RegrSxx,
    RegrSyy,
    RegrSxy,
    /// `median(x)`: exact, of the values gathered per group.
    Median,
    /// `percentile_cont(p) WITHIN GROUP (ORDER BY x)`, `percentile_cont(x, p)`: exact, of
    /// the values gathered per group ([`AggSpec::percentile`]).
    PercentileCont,
    /// `approx_median(x)`: estimated from a sketch of each group's values.
    ApproxMedian,
    /// `approx_percentile_cont(p) WITHIN GROUP (ORDER BY x)`, `approx_percentile_cont(x,
    /// p)`: estimated from a sketch of each group's values ([`AggSpec::percentile`]).
    ApproxPercentileCont,
}

impl AggFunc {
    /// Every function.
    pub const ALL: [AggFunc; 25] = [
        AggFunc::CountStar,
        AggFunc::Count,
        AggFunc::Sum,
        AggFunc::Avg,
        AggFunc::Min,
        AggFunc::Max,
        AggFunc::VarPop,
        AggFunc::VarSamp,
        AggFunc::StddevPop,
        AggFunc::StddevSamp,
        AggFunc::Corr,
        AggFunc::CovarPop,
        AggFunc::CovarSamp,
        AggFunc::RegrSlope,
        AggFunc::RegrIntercept,
        AggFunc::RegrR2,
        AggFunc::RegrAvgX,
        AggFunc::RegrAvgY,
        AggFunc::RegrSxx,
        AggFunc::RegrSyy,
        AggFunc::RegrSxy,
        AggFunc::Median,
        AggFunc::PercentileCont,
        AggFunc::ApproxMedian,
        AggFunc::ApproxPercentileCont,
    ];

    /// SQL name.
    pub fn name(self) -> &'static str {
        match self {
            AggFunc::CountStar => "count(*)",
            AggFunc::Count => "count",
            AggFunc::Sum => "sum",
            AggFunc::Avg => "avg",
            AggFunc::Min => "min",
            AggFunc::Max => "max",
            AggFunc::VarPop => "var_pop",
            AggFunc::VarSamp => "var_samp",
            AggFunc::StddevPop => "stddev_pop",
            AggFunc::StddevSamp => "stddev_samp",
            AggFunc::Corr => "corr",
            AggFunc::CovarPop => "covar_pop",
            AggFunc::CovarSamp => "covar_samp",
            AggFunc::RegrSlope => "regr_slope",
            AggFunc::RegrIntercept => "regr_intercept",
            AggFunc::RegrR2 => "regr_r2",
            AggFunc::RegrAvgX => "regr_avgx",
            AggFunc::RegrAvgY => "regr_avgy",
            AggFunc::RegrSxx => "regr_sxx",
            AggFunc::RegrSyy => "regr_syy",
            AggFunc::RegrSxy => "regr_sxy",
            AggFunc::Median => "median",
            AggFunc::PercentileCont => "percentile_cont",
            AggFunc::ApproxMedian => "approx_median",
            AggFunc::ApproxPercentileCont => "approx_percentile_cont",
        }
    }

    /// The function of SQL name `name` (as [`AggFunc::name`] writes it).
    pub fn from_name(name: &str) -> Option<AggFunc> {
        AggFunc::ALL.into_iter().find(|f| f.name() == name)
    }

    /// True for the functions of two inputs, whose partial state is the co-moments
    /// (count, both means, both M2, and the sum of products of deviations).
    pub fn is_comoment(self) -> bool {
        matches!(
            self,
            AggFunc::Corr
                | AggFunc::CovarPop
                | AggFunc::CovarSamp
                | AggFunc::RegrSlope
                | AggFunc::RegrIntercept
                | AggFunc::RegrR2
                | AggFunc::RegrAvgX
                | AggFunc::RegrAvgY
                | AggFunc::RegrSxx
                | AggFunc::RegrSyy
                | AggFunc::RegrSxy
        )
    }

    /// True for the order statistics, exact or approximate, which gather each group's
    /// values (or a sketch of them) and have no partial state: they fold only into
    /// [`AggregateOutput::Values`].
    pub fn is_order_statistic(self) -> bool {
        matches!(
            self,
            AggFunc::Median | AggFunc::PercentileCont | AggFunc::ApproxMedian | AggFunc::ApproxPercentileCont
        )
    }

    /// True for the approximate order statistics, estimated from a sketch.
    pub fn is_approximate(self) -> bool {
        matches!(self, AggFunc::ApproxMedian | AggFunc::ApproxPercentileCont)
    }

    /// True for the functions of a percentile ([`AggSpec::percentile`]).
    pub fn has_percentile(self) -> bool {
        matches!(self, AggFunc::PercentileCont | AggFunc::ApproxPercentileCont)
    }

    /// True for the variance family, whose partial state is (count, mean, M2).
    pub fn is_moment(self) -> bool {
        matches!(
            self,
            AggFunc::VarPop | AggFunc::VarSamp | AggFunc::StddevPop | AggFunc::StddevSamp
        )
    }
}

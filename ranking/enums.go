package ranking

// The values of each enum of the model, in declaration order. config
// decodes their String names, and the store maps each to its Lua number
// (ranking/store contract.go); tests iterate these lists, so a value added
// here is caught wherever it lacks a mapping.

// Windows returns every Window.
func Windows() []Window { return []Window{WindowTotal, WindowPeriodic, WindowRolling} }

// Aggregates returns every Aggregate.
func Aggregates() []Aggregate { return []Aggregate{AggSum, AggMax, AggMin, AggLast} }

// Orders returns every Order.
func Orders() []Order { return []Order{Desc, Asc} }

// Tiebreaks returns every Tiebreak.
func Tiebreaks() []Tiebreak { return []Tiebreak{TieNone, TieFirst, TieLast} }

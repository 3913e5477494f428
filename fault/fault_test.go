package fault

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseAndCount(t *testing.T) {
	t.Parallel()
	require.Nil(t, Parse(""))
	require.Nil(t, Parse(" , "))
	var none *Set
	require.False(t, none.due("after-claim"), "a nil set never fires")
	none.Hit("after-claim") // and its Hit returns

	s := Parse("after-claim, after-effect:3,relayer.after-send")
	require.True(t, s.due("after-claim"))
	require.False(t, s.due("after-claim"), "a point fires once")
	require.False(t, s.due("after-effect"))
	require.False(t, s.due("after-effect"))
	require.True(t, s.due("after-effect"), "point:n fires on the n-th hit")
	require.True(t, s.due("relayer.after-send"))
	require.False(t, s.due("mid-foreach"))
}

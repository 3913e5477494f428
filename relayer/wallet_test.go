package relayer_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/accounts/keystore"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rflow-dev/rflow/chain/anviltest"
	"github.com/rflow-dev/rflow/relayer"
)

func TestWalletFromKey(t *testing.T) {
	t.Parallel()
	_, addr := anviltest.Key(t, 3)
	for _, k := range []string{anviltest.DevKeys[3], "0x" + anviltest.DevKeys[3], " " + anviltest.DevKeys[3] + "\n"} {
		w, err := relayer.WalletFromKey(k)
		require.NoError(t, err)
		require.Equal(t, addr, w.Address())
		// Formatting never shows the key.
		for _, s := range []string{w.String(), fmt.Sprint(w), fmt.Sprintf("%v", *w), fmt.Sprintf("%+v", w)} {
			require.NotContains(t, strings.ToLower(s), anviltest.DevKeys[3][:16])
		}
	}
	_, err := relayer.WalletFromKey("")
	require.Error(t, err)
	_, err = relayer.WalletFromKey("zz" + anviltest.DevKeys[3][2:])
	require.Error(t, err)
	require.NotContains(t, err.Error(), anviltest.DevKeys[3][2:])
}

func TestWalletFromKeystore(t *testing.T) {
	t.Parallel()
	key, addr := anviltest.Key(t, 4)
	id, err := uuid.NewRandom()
	require.NoError(t, err)
	blob, err := keystore.EncryptKey(&keystore.Key{Id: id, Address: addr, PrivateKey: key}, "s3cret",
		keystore.LightScryptN, keystore.LightScryptP)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "ops.json")
	require.NoError(t, os.WriteFile(path, blob, 0o600))

	w, err := relayer.WalletFromKeystore(path, "s3cret")
	require.NoError(t, err)
	require.Equal(t, addr, w.Address())
	require.Equal(t, crypto.PubkeyToAddress(key.PublicKey), w.Address())
	_, err = relayer.WalletFromKeystore(path, "wrong")
	require.Error(t, err)
	_, err = relayer.WalletFromKeystore(filepath.Join(t.TempDir(), "missing.json"), "s3cret")
	require.Error(t, err)
}

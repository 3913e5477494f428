package relayer_test

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/rflow-dev/rflow/relayer"
)

// A wallet is built from a key the caller reads from the environment (or
// from a keystore file). It formats and logs as its address only, so passing
// it to a logger or an error message never leaks the key.
func ExampleWalletFromKey() {
	// In a project: os.Getenv("OPS_PRIVATE_KEY"). This is anvil's first dev key.
	w, err := relayer.WalletFromKey("0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(w.Address())
	fmt.Println(w)
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	logger.Info("sending", "wallet", w)
	// Output:
	// 0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266
	// 0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266
	// level=INFO msg=sending wallet=0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266
}
